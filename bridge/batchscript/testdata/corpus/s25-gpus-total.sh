#!/bin/bash
#SBATCH -N 2
#SBATCH --gpus=8
#SBATCH -t 1:00:00
srun ./x
