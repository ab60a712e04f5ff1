package sshbatch

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/gridsub/gridsub/backends"
)

// What the SLURM and PBS backends both require of a job spec: they run it
// through the same bash wrapper in a job directory named by the grid id.

var (
	gridIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`) })
	envKeyRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
)

// ValidGridID reports whether s can name a job directory (and a tag): 1-128
// letters, digits, '.', '_' or '-', not starting with '.', '_' or '-'.
func ValidGridID(s string) bool { return gridIDRe().MatchString(s) }

// RelPath checks a path that must stay inside the job directory and
// returns it cleaned; what names it in the error (ErrInvalidSpec).
func RelPath(what, p string) (string, error) {
	c := path.Clean(p)
	if p == "" || path.IsAbs(p) || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: %s %q must be a relative path inside the job directory", backends.ErrInvalidSpec, what, p)
	}
	return c, nil
}

// CheckSpec adds to JobSpec.Validate what a job run by the shared wrapper
// needs: a grid id that can name a directory, cores per node >= 0,
// environment names that are shell identifiers, and a work dir, inputs and
// outputs inside the job directory. Each backend adds its own checks (the
// reservation's form).
func CheckSpec(spec *backends.JobSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if !gridIDRe().MatchString(spec.GridID) {
		return fmt.Errorf("%w: grid id %q must be 1-128 letters, digits, '.', '_' or '-' (it names the job directory)", backends.ErrInvalidSpec, spec.GridID)
	}
	if spec.CoresPerNode < 0 {
		return fmt.Errorf("%w: cores per node must be >= 0, got %d", backends.ErrInvalidSpec, spec.CoresPerNode)
	}
	for k := range spec.Env {
		if !envKeyRe().MatchString(k) {
			return fmt.Errorf("%w: environment name %q is not a shell identifier ([A-Za-z_][A-Za-z0-9_]*)", backends.ErrInvalidSpec, k)
		}
	}
	if spec.WorkDir != "" {
		if _, err := RelPath("work dir", spec.WorkDir); err != nil {
			return err
		}
	}
	for _, in := range spec.Inputs {
		if _, err := RelPath("input", in.Remote); err != nil {
			return err
		}
	}
	for _, o := range spec.Outputs {
		if _, err := RelPath("output", o); err != nil {
			return err
		}
	}
	return nil
}
