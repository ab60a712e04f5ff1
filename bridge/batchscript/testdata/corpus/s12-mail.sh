#!/bin/bash
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=alice@example.org
#SBATCH -t 10
./run
