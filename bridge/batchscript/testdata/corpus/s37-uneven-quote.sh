#!/bin/bash
#SBATCH --job-name="unterminated
#SBATCH -t 10
./x
