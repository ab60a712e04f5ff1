package pbs

import (
	"fmt"
	"regexp"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// gridIDRe is the form of a grid id (sshbatch.ValidGridID); reservations
// check user names with it.
var gridIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// relPath checks a path that must stay inside the job directory.
var relPath = sshbatch.RelPath

// checkSpec adds this backend's requirements to JobSpec.Validate: those
// shared with SLURM (sshbatch.CheckSpec) and a reservation id of PBS's form.
func checkSpec(spec *backends.JobSpec) error {
	if err := sshbatch.CheckSpec(spec); err != nil {
		return err
	}
	if spec.Reservation != "" && !validResvID(spec.Reservation) {
		return fmt.Errorf("%w: reservation %q is not a PBS reservation id (R<n>[.<server>])", backends.ErrInvalidSpec, spec.Reservation)
	}
	return nil
}
