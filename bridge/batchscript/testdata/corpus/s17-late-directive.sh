#!/bin/bash
#SBATCH -t 10
echo start
#SBATCH --nodes=64
./run
