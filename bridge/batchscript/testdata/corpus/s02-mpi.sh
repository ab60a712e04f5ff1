#!/bin/bash
#SBATCH -J mpi_run
#SBATCH -N 4
#SBATCH --ntasks-per-node=16
#SBATCH -t 02:00:00
#SBATCH -p compute
#SBATCH -A proj123
module load openmpi
srun ./a.out
