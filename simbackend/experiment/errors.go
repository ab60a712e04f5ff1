package experiment

import (
	"errors"

	"github.com/gridsub/gridsub/bridge/jobfile"
)

// Sentinel errors. Errors of Load and Parse are an ErrorList of *FieldError,
// each wrapping one of them; errors.Is finds the sentinel through the list.
var (
	// ErrSyntax: the file is not valid YAML, or not a single document.
	ErrSyntax = errors.New("invalid YAML")
	// ErrUnknownKey: a mapping holds a key the format does not define.
	ErrUnknownKey = errors.New("unknown key")
	// ErrType: a value has the wrong YAML type.
	ErrType = errors.New("wrong type")
	// ErrValue: a value is out of range, malformed or refers to nothing
	// (an unknown policy, h set or metric).
	ErrValue = errors.New("invalid value")
	// ErrNoTrace: the workload trace file cannot be found; the message says
	// where it was looked for and how to point gridsub at it.
	ErrNoTrace = errors.New("workload trace not found")
)

// FieldError is one problem of an experiment file: the job-file language's
// positioned error (File, Pos.Line, Field, Msg, the sentinel Err).
type FieldError = jobfile.FieldError

// ErrorList is every problem found in one file, in file order.
type ErrorList = jobfile.ErrorList
