#!/bin/bash
#SBATCH --dependency=afterok:1234:1235,afterany:99
#SBATCH -t 1:00:00
./post
