package pbs

import (
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Files in the job directory: the shared wrapper's (sshbatch), and the id
// file the submission writes.
const (
	ExitFile   = sshbatch.ExitFile   // the exit code, written atomically at the end
	StdoutFile = sshbatch.StdoutFile // the job's standard output (PBS copies it here at the end)
	StderrFile = sshbatch.StderrFile // the job's standard error
	ScriptFile = sshbatch.ScriptFile // the wrapper itself
	IDFile     = ".gridsub-jobid"    // the PBS job id, written at submission
)

// JobDir is the job's directory relative to the backend's remote directory
// (sshbatch.JobDir).
func JobDir(spec *backends.JobSpec) string { return sshbatch.JobDir(spec) }

// prologue enters the directory qsub ran in ($PBS_O_WORKDIR, the job
// directory): PBS starts a job in the user's home directory.
const prologue = "# PBS starts jobs in the home directory: enter the job directory qsub ran in.\n" +
	"cd -- \"$PBS_O_WORKDIR\" || exit 125\n"

// Wrapper renders the job script: the shared wrapper (sshbatch.Wrapper)
// after a cd to $PBS_O_WORKDIR.
func Wrapper(spec *backends.JobSpec) string { return sshbatch.Wrapper(spec, prologue) }

// checkSpec adds this backend's requirements to JobSpec.Validate: those
// of the shared wrapper (sshbatch.CheckSpec) and a reservation id of PBS's
// form.
func checkSpec(spec *backends.JobSpec) error {
	if err := sshbatch.CheckSpec(spec); err != nil {
		return err
	}
	if spec.Reservation != "" && !validResvID(spec.Reservation) {
		return fmt.Errorf("%w: reservation %q is not a PBS reservation id (R<n>[.<server>])", backends.ErrInvalidSpec, spec.Reservation)
	}
	return nil
}

// checkRemoteDir refuses a remote directory PBS would misread: -o/-e take
// [host:]path, Variable_List (PBS_O_WORKDIR) is comma separated and DSV is
// '|' separated.
func checkRemoteDir(site, dir string) error {
	if strings.ContainsAny(dir, ":,| \t\n\\\"'") {
		return fmt.Errorf("%w: %s: remote directory %q must not contain ':', ',', '|', quotes, backslashes or white space (PBS reads them in its own formats)",
			backends.ErrInvalidSpec, site, dir)
	}
	return nil
}
