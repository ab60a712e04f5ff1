#!/bin/bash
#SBATCH --job-name="analysis: run 1/3"
#SBATCH -t 10
./x
