#!/bin/bash
#SBATCH   --job-name   "my job"    # a comment after it
#SBATCH	-t	15
#SBATCH --ntasks 8   
#SBATCH -c2
# SBATCH --qos=ignored-because-of-the-space
##SBATCH --constraint=skylake
./run
