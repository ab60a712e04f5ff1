// Package slurm is gridsub's SLURM backend: it drives one SLURM cluster
// through its login node, with every remote command an argv handed to a
// backends.Runner (in production the one shared SSH connection of
// backends/transport) and every file moved by a backends.Stager (SFTP).
//
// The package has three layers:
//
//   - argv builders (argv.go): sbatch, squeue, scontrol, sinfo, scancel, sacct
//     and the job-completion log, each with an explicit output format, an
//     unambiguous delimiter and SLURM_TIME_FORMAT=%s, and with the user's
//     SQUEUE_* overrides removed;
//   - pure parsers (parse.go) tested against outputs captured from real
//     SLURM 22.05 daemons (testdata/, see testdata/README.md); unreadable
//     output is an error wrapping backends.ErrBadOutput that quotes the text;
//   - the Backend (backend.go), which implements backends.Backend, Finder,
//     Fetcher and Reserver on top of them; staging in and fetching outputs
//     (stage.go) move regular files only, within the job's byte budget
//     (Config.MaxJobBytes), and write outputs through backends.OutputDir.
//
// Each job runs in its own directory <RemoteDir>/gridsub/<grid id>[-<k>]/
// through a generated bash wrapper (wrapper.go) that sets the environment,
// runs the command or script and atomically records the exit code in
// .gridsub-exit, the record of last resort when SLURM has forgotten the job.
//
// Status is batched: one squeue per call for every id; ids squeue no longer
// knows (after MinJobAge) are looked up in one grep of the jobcomp/filetxt log,
// then sacct where accounting exists, then in one read of the exit-code files,
// and are reported as StateLost only when every record is gone.
package slurm
