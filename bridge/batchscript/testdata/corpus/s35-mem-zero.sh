#!/bin/bash
#SBATCH --mem=0
#SBATCH -t 10
./x
