package jobrules

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// Sentinel errors: every *Error wraps one of them.
var (
	// ErrValue: a value is malformed or out of range.
	ErrValue = errors.New("invalid value")
	// ErrPath: a path that must stay inside the job directory is absolute
	// or escapes it with "..".
	ErrPath = errors.New("path not confined to the job directory")
	// ErrOutsideRoot: a local path is not inside any of the roots allowed
	// for it (after its symbolic links are resolved), or names a hidden
	// file or directory below the root.
	ErrOutsideRoot = errors.New("path outside the allowed roots")
)

// Error is one broken rule: Msg says what is wrong and what would be
// valid, without naming the field (the caller does).
type Error struct {
	Msg string
	Err error // ErrValue, ErrPath or ErrOutsideRoot
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

func bad(sentinel error, format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// Limits. They are far above what any real job asks for, and low enough
// that sums and products of them stay in range.
const (
	MaxNameLen      = 64
	MaxNodes        = 1 << 20
	MaxCoresPerNode = 1 << 20
	MaxMemPerNode   = 1 << 50 // bytes (1 PiB)
	MaxGPUsPerNode  = 1 << 10
	MaxSiteOptions  = 1024 // entries of a job's per-site options
	// MaxWalltime bounds a walltime estimate (and a simulated run time):
	// scaled by a site's speed and rounded up to the second it still fits
	// a time.Duration many times over.
	MaxWalltime = 365 * 24 * time.Hour
	// MaxDataSize bounds the bytes a job moves: even over a slow link
	// (10 KB/s) its transfer time fits a time.Duration.
	MaxDataSize = 1 << 46 // bytes (64 TiB)
	// ClockSkew is how far before the submission a deadline or a
	// reservation start may lie: the client's and the broker's clocks
	// need not agree to the second.
	ClockSkew = 5 * time.Minute
	// MaxHorizon is how far after the submission a deadline or a
	// reservation window may end.
	MaxHorizon  = 10 * 365 * 24 * time.Hour
	MaxEnvVars  = 1024
	MaxEnvValue = 64 << 10 // bytes
	MaxArgs     = 4096
	MaxWord     = 64 << 10 // bytes of one argv word
	MaxScript   = 1 << 20  // bytes
	MaxPathLen  = 4096     // bytes
	MaxFiles    = 4096     // inputs, and outputs, of one job
	MaxExitCode = 255
	// MaxBenefit bounds the benefit function's a, b and c (SPEC.md §4), so
	// that c·seconds stays finite.
	MaxBenefit = 1e15
)

// QoSTiers are the valid QoS values ("" in a request means auto).
var QoSTiers = []string{"auto", "high", "low", "none"}

// ReservedEnvPrefixes are environment name prefixes a job may not set:
// gridsub's own variables and its wrapper's shell variables (GRIDSUB_*,
// compared without case, so gridsub_rc too) and what the batch systems set
// or read. The comparison ignores case.
var ReservedEnvPrefixes = []string{"GRIDSUB_", "SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "PBS_"}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// IsName reports whether s is a job or site name: 1-64 letters, digits,
// '.', '_' or '-', starting with a letter or digit.
func IsName(s string) bool {
	if s == "" || len(s) > MaxNameLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// Name checks a job name.
func Name(s string) error {
	if !IsName(s) {
		return bad(ErrValue, "must be 1-64 characters of letters, digits, '.', '_' and '-', starting with a letter or digit, got %q", s)
	}
	return nil
}

// IsEnvName reports whether k is a shell identifier [A-Za-z_][A-Za-z0-9_]*.
func IsEnvName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// EnvName checks an environment variable name: a shell identifier, not
// reserved (ReservedEnvPrefixes).
func EnvName(k string) error {
	if !IsEnvName(k) {
		return bad(ErrValue, "%q is not a valid environment variable name (letters, digits and '_', not starting with a digit)", k)
	}
	up := strings.ToUpper(k)
	for _, p := range ReservedEnvPrefixes {
		if strings.HasPrefix(up, p) {
			return bad(ErrValue, "%q is a reserved name: GRIDSUB_* (any case), SLURM_*, SBATCH_*, SALLOC_*, SRUN_* and PBS_* belong to gridsub and the batch systems; choose another name", k)
		}
	}
	return nil
}

// EnvValue checks an environment value: no NUL, at most MaxEnvValue bytes.
func EnvValue(v string) error {
	switch {
	case strings.IndexByte(v, 0) >= 0:
		return bad(ErrValue, "must not contain a NUL byte")
	case len(v) > MaxEnvValue:
		return bad(ErrValue, "is %d bytes; a value may be at most %d", len(v), MaxEnvValue)
	}
	return nil
}

// Word checks one argv word: no NUL, at most MaxWord bytes.
func Word(s string) error {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return bad(ErrValue, "must not contain a NUL byte")
	case len(s) > MaxWord:
		return bad(ErrValue, "is %d bytes; a word may be at most %d", len(s), MaxWord)
	}
	return nil
}

// Script checks a script body: not blank, no NUL, at most MaxScript bytes.
func Script(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return bad(ErrValue, "is empty; give the bash commands to run")
	case strings.IndexByte(s, 0) >= 0:
		return bad(ErrValue, "must not contain a NUL byte")
	case len(s) > MaxScript:
		return bad(ErrValue, "is %d bytes; a script may be at most %d", len(s), MaxScript)
	}
	return nil
}

// Setup checks a setup step (bash run before the command): may be empty,
// no NUL, at most MaxScript bytes.
func Setup(s string) error {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return bad(ErrValue, "must not contain a NUL byte")
	case len(s) > MaxScript:
		return bad(ErrValue, "is %d bytes; a setup step may be at most %d", len(s), MaxScript)
	}
	return nil
}

// BatchName checks a partition, queue or account name: 1-64 letters,
// digits, '.', '_', '-' or '@', starting with a letter or digit (nothing a
// batch system or a shell would read as an option or syntax).
func BatchName(s string) error {
	ok := len(s) >= 1 && len(s) <= MaxNameLen && isAlnum(s[0])
	for i := 0; ok && i < len(s); i++ {
		ok = isAlnum(s[i]) || strings.IndexByte("._-@", s[i]) >= 0
	}
	if !ok {
		return bad(ErrValue, "%q must be 1-%d letters, digits, '.', '_', '-' or '@', starting with a letter or digit", s, MaxNameLen)
	}
	return nil
}

// RelPath checks a path relative to the job directory at a site: not
// empty, not absolute (nor "~...", "\...", "C:..."), not escaping with "..",
// no NUL, at most MaxPathLen bytes. allowDot permits "." (the job directory
// itself). It returns the cleaned path with "/" separators, keeping a
// trailing "/" (which marks a directory).
func RelPath(s string, allowDot bool) (string, error) {
	switch {
	case s == "":
		return "", bad(ErrValue, "must be a path relative to the job directory, got an empty string")
	case strings.IndexByte(s, 0) >= 0:
		return "", bad(ErrValue, "must not contain a NUL byte")
	case len(s) > MaxPathLen:
		return "", bad(ErrValue, "is %d bytes; a path may be at most %d", len(s), MaxPathLen)
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") || strings.HasPrefix(s, `\`) || len(s) > 1 && s[1] == ':':
		return "", bad(ErrPath, "must be relative to the job directory, got the absolute path %q", s)
	}
	c := path.Clean(strings.ReplaceAll(s, `\`, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", bad(ErrPath, "%q escapes the job directory; use a path inside it (no leading ../)", s)
	}
	if c == "." && !allowDot {
		return "", bad(ErrValue, "must name a file or directory inside the job directory, got %q", s)
	}
	if strings.HasSuffix(s, "/") && c != "." {
		c += "/"
	}
	return c, nil
}

// Count checks a whole number in [lo, hi]; want says what is valid.
func Count(v, lo, hi int64, want string) error {
	if v < lo || v > hi {
		return bad(ErrValue, "must be %s, got %d", want, v)
	}
	return nil
}

// Walltime checks a walltime estimate or a run time: > 0 and at most
// MaxWalltime.
func Walltime(d time.Duration) error {
	if d <= 0 || d > MaxWalltime {
		return bad(ErrValue, "must be > 0 and at most %s (365 days), got %s", MaxWalltime, d)
	}
	return nil
}

// DataSize checks a byte count: 0 .. MaxDataSize.
func DataSize(n int64) error {
	if n < 0 || n > MaxDataSize {
		return bad(ErrValue, "must be 0 .. %d bytes (64 TiB), got %d", int64(MaxDataSize), n)
	}
	return nil
}

// QoS checks a QoS tier; "" is taken as auto.
func QoS(s string) error {
	if s == "" {
		return nil
	}
	for _, t := range QoSTiers {
		if s == t {
			return nil
		}
	}
	return bad(ErrValue, "must be one of %s, got %q", strings.Join(QoSTiers, ", "), s)
}

// Time checks a deadline or a reservation time against the submission
// time: not more than ClockSkew before it (which also refuses year 0001
// and other zero-ish times) and not more than MaxHorizon after it.
func Time(t, submit time.Time) error {
	switch {
	case t.Before(submit.Add(-ClockSkew)):
		return bad(ErrValue, "%s is before the submission time %s", t.UTC().Format(time.RFC3339), submit.UTC().Format(time.RFC3339))
	case t.After(submit.Add(MaxHorizon)):
		return bad(ErrValue, "%s is more than 10 years after the submission time %s", t.UTC().Format(time.RFC3339), submit.UTC().Format(time.RFC3339))
	}
	return nil
}

// Offset checks a time relative to the submission ("+4h"): at most
// MaxHorizon.
func Offset(d time.Duration) error {
	if d > MaxHorizon {
		return bad(ErrValue, "+%s is more than 10 years after the submission", d)
	}
	return nil
}

// Benefit checks one of the benefit function's numbers: finite, in
// [lo, MaxBenefit] (lo excluded when open).
func Benefit(v, lo float64, open bool) error {
	if v != v || v > MaxBenefit || v < lo || open && v == lo {
		op := ">="
		if open {
			op = ">"
		}
		return bad(ErrValue, "must be a number %s %g and at most %g, got %g", op, lo, MaxBenefit, v)
	}
	return nil
}
