#!/bin/bash
#SBATCH --nodelist=node[01-04]
#SBATCH -t 10
./run
