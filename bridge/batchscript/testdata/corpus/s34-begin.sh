#!/bin/bash
#SBATCH --begin=now+1hour
#SBATCH -t 10
./x
