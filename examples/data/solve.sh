#!/bin/bash
# Sums the numbers of input.dat, honouring params.txt's iteration count.
set -euo pipefail
iters=$(awk -F' = ' '/^iterations/ {print $2}' params.txt)
sum=$(tr ' ' '\n' < input.dat | awk 'NF {s += $1} END {printf "%.5f", s}')
echo "iterations=$iters sum=$sum" > result.txt
mkdir -p logs
echo "solved on $(hostname) at $(date -u +%FT%TZ)" > logs/solve.log
