#!/bin/bash
#SBATCH --tiem=10
./x
