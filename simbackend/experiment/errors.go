package experiment

import (
	"errors"
	"fmt"
	"strings"
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

// FieldError is one problem of an experiment file.
type FieldError struct {
	File  string
	Line  int    // 1-based; 0 when unknown
	Field string // dotted path such as "sweep.p[2]"; "" for the whole file
	Msg   string
	Err   error // the sentinel
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// ErrorList is every problem found in one file, in file order.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap exposes the members to errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}
