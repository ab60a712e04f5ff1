package pbs

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/gridsub/gridsub/backends"
)

var (
	gridIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// relPath checks a path that must stay inside the job directory.
func relPath(what, p string) (string, error) {
	c := path.Clean(p)
	if p == "" || path.IsAbs(p) || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: %s %q must be a relative path inside the job directory", backends.ErrInvalidSpec, what, p)
	}
	return c, nil
}

// checkSpec adds this backend's requirements to JobSpec.Validate.
func checkSpec(spec *backends.JobSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if !gridIDRe.MatchString(spec.GridID) {
		return fmt.Errorf("%w: grid id %q must be 1-128 letters, digits, '.', '_' or '-' (it names the job directory)", backends.ErrInvalidSpec, spec.GridID)
	}
	if spec.CoresPerNode < 0 {
		return fmt.Errorf("%w: cores per node must be >= 0, got %d", backends.ErrInvalidSpec, spec.CoresPerNode)
	}
	for k := range spec.Env {
		if !envKeyRe.MatchString(k) {
			return fmt.Errorf("%w: environment name %q is not a shell identifier ([A-Za-z_][A-Za-z0-9_]*)", backends.ErrInvalidSpec, k)
		}
	}
	if spec.WorkDir != "" {
		if _, err := relPath("work dir", spec.WorkDir); err != nil {
			return err
		}
	}
	for _, in := range spec.Inputs {
		if _, err := relPath("input", in.Remote); err != nil {
			return err
		}
	}
	for _, o := range spec.Outputs {
		if _, err := relPath("output", o); err != nil {
			return err
		}
	}
	if spec.Reservation != "" && !validResvID(spec.Reservation) {
		return fmt.Errorf("%w: reservation %q is not a PBS reservation id (R<n>[.<server>])", backends.ErrInvalidSpec, spec.Reservation)
	}
	return nil
}
