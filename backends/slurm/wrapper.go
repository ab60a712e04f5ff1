package slurm

import (
	"fmt"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Files in the job directory: the shared wrapper's (sshbatch).
const (
	ExitFile   = sshbatch.ExitFile   // the exit code, written atomically at the end
	StdoutFile = sshbatch.StdoutFile // the job's standard output
	StderrFile = sshbatch.StderrFile // the job's standard error
	ScriptFile = sshbatch.ScriptFile // the wrapper itself
)

// JobDir is the job's directory relative to the backend's remote directory
// (sshbatch.JobDir).
func JobDir(spec *backends.JobSpec) string { return sshbatch.JobDir(spec) }

// Wrapper renders the job script: the shared wrapper (sshbatch.Wrapper) as
// it is; sbatch starts the job in the job directory (--chdir).
func Wrapper(spec *backends.JobSpec) string { return sshbatch.Wrapper(spec, "") }

// checkSpec adds this backend's requirements to JobSpec.Validate: those
// of the shared wrapper (sshbatch.CheckSpec) and a reservation name SLURM
// takes.
func checkSpec(spec *backends.JobSpec) error {
	if err := sshbatch.CheckSpec(spec); err != nil {
		return err
	}
	if spec.Reservation != "" && !resvNameRe().MatchString(spec.Reservation) {
		return fmt.Errorf("%w: reservation name %q must be letters, digits, '.', '_' or '-'", backends.ErrInvalidSpec, spec.Reservation)
	}
	return nil
}
