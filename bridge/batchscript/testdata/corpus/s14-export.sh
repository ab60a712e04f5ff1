#!/bin/bash
#SBATCH --export=ALL,OMP_NUM_THREADS=4,INPUT=/data/x
#SBATCH -t 10
./run
