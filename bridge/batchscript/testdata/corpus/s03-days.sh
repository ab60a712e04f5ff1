#!/bin/bash
#SBATCH --time=1-00:00:00
#SBATCH --mem=4G
./long
