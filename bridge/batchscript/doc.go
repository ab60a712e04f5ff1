// Package batchscript reads batch scripts — shell scripts with #SBATCH
// (SLURM) or #PBS (PBS Pro, Torque) directives — and the equivalent
// sbatch and qsub command-line options, and translates them into a gridsub
// job (jobfile.Job) that runs the script body at any site, whatever its
// batch system.
//
// Parse is pure: it reads no file, no clock and no environment (the
// submitting environment, needed by --export=VAR and -V, comes in
// Options.Environ). Every directive is either translated, or refused with
// an *Error naming the directive and its line (ErrUnsupported: gridsub cannot
// honour it; ErrValue: its value is malformed), or — for directives that
// change nothing a gridsub job can observe — accepted with a Warning that
// `gridsub validate` prints. Directives after the first command are ignored,
// as sbatch and qsub ignore them, each with a Warning.
//
// Inside the job, Job's script sets the usual variables at every site:
// SLURM_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_NTASKS, SLURM_SUBMIT_DIR... and
// their PBS_* equivalents, unless the site's own batch system already set
// them (srun and mpirun need the site's own), and GRIDSUB_JOB_NUM, the
// integer id the front-ends print.
package batchscript
