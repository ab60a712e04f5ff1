#!/usr/bin/env python3
#SBATCH --job-name=py
#SBATCH --time=0:05:00
#SBATCH --mem=500
print("hello from python")
