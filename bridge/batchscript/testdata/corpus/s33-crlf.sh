#!/bin/bash
#SBATCH -t 10
#SBATCH -J crlf
echo windows
