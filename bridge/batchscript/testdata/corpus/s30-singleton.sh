#!/bin/bash
#SBATCH --dependency=singleton
#SBATCH -t 10
./x
