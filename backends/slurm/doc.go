// Package slurm is gridsub's SLURM dialect of the SSH batch backend
// (backends/sshbatch): New and Connect return a Backend, an
// sshbatch.Backend that speaks SLURM through the cluster's login node,
// plus Withdraw (backends.Withdrawer).
//
// The package has three parts:
//
//   - argv builders (argv.go): sbatch, squeue, scontrol, sinfo, scancel,
//     sacct and the job-completion log, each with an explicit output
//     format, an unambiguous delimiter and SLURM_TIME_FORMAT=%s, and with
//     the user's SQUEUE_* overrides removed;
//   - pure parsers (parse.go) tested against outputs captured from real
//     SLURM 22.05 daemons (testdata/, see testdata/README.md); unreadable
//     output is an error wrapping backends.ErrBadOutput that quotes the
//     text;
//   - the dialect (backend.go): which command does what for the shared
//     backend, and how SLURM's words read (a controller that cannot be
//     reached is backends.ErrUnavailable).
//
// Submission: one `bash -c` that makes the job directory, stores the
// shared wrapper there and runs `sbatch --chdir` on it; in a batch, the
// directories are made in one mkdir and each sbatch reads the wrapper from
// its here-document. The grid tag is the job's --comment (GridTag).
//
// Status is batched: one squeue per call for every id; ids squeue no
// longer knows (after MinJobAge) are looked up in one grep of the
// jobcomp/filetxt log, then sacct where accounting exists, and then (by
// the shared backend) in one read of the exit-code files; they are
// StateLost only when every record is gone.
package slurm
