#!/bin/bash
#SBATCH --dependency=afternotok:1234
#SBATCH -t 10
./cleanup
