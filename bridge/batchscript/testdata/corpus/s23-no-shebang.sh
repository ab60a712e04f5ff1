#SBATCH -t 10
./run
