#!/bin/bash
#SBATCH --job-name=quick
echo hi
