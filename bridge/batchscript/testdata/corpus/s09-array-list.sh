#!/bin/bash
#SBATCH -a 0,4,10-20:2
#SBATCH -t 5
echo "$SLURM_ARRAY_TASK_ID"
