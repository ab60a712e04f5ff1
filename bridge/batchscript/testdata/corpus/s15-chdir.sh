#!/bin/bash
#SBATCH --chdir=work/run1
#SBATCH -o slurm-%j.out
#SBATCH -t 10
./run
