#!/bin/bash
#SBATCH --job-name=hello
#SBATCH --time=10
echo hello
