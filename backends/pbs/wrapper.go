package pbs

import (
	"strings"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
)

// Files in the job directory. The wrapper and its exit-code file are the
// SLURM backend's (the same bash wrapper runs under both batch systems).
const (
	ExitFile   = slurm.ExitFile   // the exit code, written atomically at the end
	StdoutFile = slurm.StdoutFile // the job's standard output (PBS copies it here at the end)
	StderrFile = slurm.StderrFile // the job's standard error
	ScriptFile = slurm.ScriptFile // the wrapper itself
	IDFile     = ".gridsub-jobid" // the PBS job id, written at submission
)

// JobDir is the job's directory relative to the backend's remote directory
// (gridsub/<grid id>, or gridsub/<grid id>-<k> for component k).
func JobDir(spec *backends.JobSpec) string { return slurm.JobDir(spec) }

// Wrapper renders the job script: PBS starts a job in the user's home
// directory, so it first enters the directory qsub ran in
// ($PBS_O_WORKDIR, the job directory), then runs the SLURM backend's
// wrapper (environment, work dir, command or script quoted literally, exit
// code recorded atomically in .gridsub-exit).
func Wrapper(spec *backends.JobSpec) string {
	return "#!/bin/bash\n" +
		"# PBS starts jobs in the home directory: enter the job directory qsub ran in.\n" +
		"cd -- \"$PBS_O_WORKDIR\" || exit 125\n" +
		strings.TrimPrefix(slurm.Wrapper(spec), "#!/bin/bash\n")
}
