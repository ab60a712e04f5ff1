package jobfile

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Sentinel errors. Every *FieldError wraps exactly one of them, so callers
// can ask what kind of problem a job file has with errors.Is, whatever the
// detail of the message.
var (
	// ErrSyntax: the file is not valid YAML (or not a single YAML document).
	ErrSyntax = errors.New("invalid YAML")
	// ErrUnknownField: a mapping has a key the schema does not define.
	ErrUnknownField = errors.New("unknown field")
	// ErrType: a value has the wrong YAML type (a list where a number belongs).
	ErrType = errors.New("wrong type")
	// ErrRequired: a required field is missing or empty.
	ErrRequired = errors.New("missing required field")
	// ErrValue: a value has the right type but is out of range or malformed
	// (negative nodes, a bad duration, an unknown qos tier).
	ErrValue = errors.New("invalid value")
	// ErrConflict: fields that exclude each other are both given (command and
	// script), or a field needs another one that is missing (benefit without a
	// deadline).
	ErrConflict = errors.New("conflicting fields")
	// ErrPath: a path escapes the job directory or is absolute where a path
	// relative to the job directory is required.
	ErrPath = errors.New("path not confined to the job directory")
	// ErrUnknownSite: a site name is not one of the configured sites
	// (reported by CheckSites).
	ErrUnknownSite = errors.New("unknown site")
	// ErrInput: an input file named by the job cannot be read (reported by
	// Load).
	ErrInput = errors.New("input file not readable")
	// ErrTime: a time is impossible once the submission time is known (a
	// deadline in the past, a reservation window shorter than the walltime);
	// reported by Resolve.
	ErrTime = errors.New("impossible time")
	// ErrFile: the job file is not a regular file (a FIFO, a device, a
	// directory) or is larger than MaxFileSize (reported by Load).
	ErrFile = errors.New("not a usable job file")
)

// Pos is a position in a job file; lines and columns count from 1.
type Pos struct {
	Line, Column int
}

// FieldError is one problem in a file gridsub reads — a job file, and the
// configuration (internal/config) and experiment files
// (simbackend/experiment), which use this same type: where it is, which
// field, what is wrong and what would be valid. It wraps one sentinel error
// of the language that found it.
type FieldError struct {
	File  string // the file name as given to Parse or Load
	Pos   Pos    // position of the offending value (or of its mapping when missing)
	Field string // field path, e.g. "resources.nodes" or "inputs[1].remote"; "" for the whole file
	Msg   string // what is wrong and what would be valid
	Err   error  // the sentinel
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Pos.Line)
		if e.Pos.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Pos.Column)
		}
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

// ErrorList is every problem found in one file, in file order. It is
// the error Parse, Load, CheckSites and Resolve return when anything is
// wrong; errors.As finds the first *FieldError through it and errors.Is
// matches any of the sentinels of its members.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes the members to errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sorted orders the list by position (stable for equal positions).
func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Pos.Line != l[j].Pos.Line {
			return l[i].Pos.Line < l[j].Pos.Line
		}
		return l[i].Pos.Column < l[j].Pos.Column
	})
	return l
}

// asError returns nil for an empty list, so that a nil ErrorList never
// becomes a non-nil error interface.
func (l ErrorList) asError() error {
	if len(l) == 0 {
		return nil
	}
	return l.sorted()
}

// Suggest returns the member of valid closest to word by edit distance when
// it is close enough to be a plausible typo, else "". Comparison ignores case.
func Suggest(word string, valid []string) string {
	best, bestD := "", -1
	lw := strings.ToLower(word)
	for _, v := range valid {
		d := editDistance(lw, strings.ToLower(v))
		if bestD < 0 || d < bestD {
			best, bestD = v, d
		}
	}
	limit := 2
	if len(word) <= 3 {
		limit = 1
	}
	if bestD < 0 || bestD > limit || best == word {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (in runes).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
