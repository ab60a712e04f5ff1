#!/bin/sh
#SBATCH --time=2-12
#SBATCH --mem-per-cpu=2G
#SBATCH --cpus-per-task=8
./x
