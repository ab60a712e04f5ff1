#!/bin/bash
#SBATCH -t 30
#SBATCH -N 1
#PBS -l walltime=00:30:00
#PBS -l nodes=1
./portable
