#!/bin/bash
#SBATCH --input=data.txt
#SBATCH -t 10
./x
