#!/bin/bash
#SBATCH -n 4
#SBATCH -t 10
srun hostname
