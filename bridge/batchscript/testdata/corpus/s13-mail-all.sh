#!/bin/bash
#SBATCH --mail-type=ALL
#SBATCH -t 10
./run
