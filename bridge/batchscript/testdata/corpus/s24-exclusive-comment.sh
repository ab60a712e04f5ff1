#!/bin/bash
#SBATCH --exclusive
#SBATCH --comment="nightly build"
#SBATCH --requeue
#SBATCH -t 20
#SBATCH -N 2 -n 64
srun ./build
