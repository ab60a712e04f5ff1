#!/bin/bash
#SBATCH --gres=gpu:a100:4
#SBATCH -t 1:00:00
./x
