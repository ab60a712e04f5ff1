#!/bin/bash
#SBATCH --time=90:00
#SBATCH --mem=4000M
./x
