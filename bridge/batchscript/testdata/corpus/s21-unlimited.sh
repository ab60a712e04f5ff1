#!/bin/bash
#SBATCH --time=UNLIMITED
./run
