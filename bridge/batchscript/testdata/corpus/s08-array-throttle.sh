#!/bin/bash
#SBATCH --array=1-100%10
#SBATCH --output=out/run_%A_%a.log
#SBATCH -t 30
./sim --seed "$SLURM_ARRAY_TASK_ID"
