#!/bin/bash
#SBATCH -C "skylake|cascadelake"
#SBATCH -t 10
./run
