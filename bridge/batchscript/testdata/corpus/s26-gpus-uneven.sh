#!/bin/bash
#SBATCH -N 3
#SBATCH --gpus=8
#SBATCH -t 1:00:00
srun ./x
