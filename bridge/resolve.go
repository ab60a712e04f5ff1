package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

var (
	// ErrAmbiguous: a shortened job id matches more than one job (PickID).
	ErrAmbiguous = errors.New("ambiguous job id")
)

// States lists every job state in the order a job passes through them. It
// is the one list the CLI (list --state, completion), the API (the state
// filter) and the docs draw on.
var States = []JobState{Held, Queued, Reserved, Submitting, Dispatched, Running, Completed, Failed, Timeout, Cancelled, Rejected}

// StateNames is States as a comma-separated list, for help texts and errors.
func StateNames() string {
	names := make([]string, len(States))
	for i, s := range States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ParseState reads a state name (case and surrounding blanks ignored). An
// unknown name is an error wrapping ErrBadRequest that lists the valid ones.
func ParseState(s string) (JobState, error) {
	st := JobState(strings.ToLower(strings.TrimSpace(s)))
	if !slices.Contains(States, st) {
		return "", fmt.Errorf("%w: state %q; valid: %s", ErrBadRequest, s, StateNames())
	}
	return st, nil
}

// IDMatcher is an optional capability of a Store (and of what the API
// serves): the ids of the stored jobs that start or end with s, in
// submission order, at most limit of them (0: all). The match is literal
// (no wildcards); ASCII case may be ignored.
type IDMatcher interface {
	MatchIDs(ctx context.Context, s string, limit int) ([]string, error)
}

// maxShown bounds the ids an ambiguity error lists.
const maxShown = 5

// PickID chooses the one id among matches (the jobs whose id starts or
// ends with q, as IDMatcher returns them) that q names: an id equal to q
// wins; else exactly one match must remain. No match is an error wrapping
// ErrNotFound ("no job matches"); several wrap ErrAmbiguous and
// ErrBadRequest and name them ("ambiguous: matches A, B").
func PickID(q string, matches []string) (string, error) {
	if q == "" {
		return "", fmt.Errorf("%w: an empty job id", ErrBadRequest)
	}
	if slices.Contains(matches, q) {
		return q, nil
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("%w: no job matches %q (a job id, or a unique prefix or suffix of one)", ErrNotFound, q)
	case 1:
		return matches[0], nil
	}
	shown := matches[:min(len(matches), maxShown)]
	more := ""
	if len(matches) > maxShown {
		more = ", ..."
	}
	return "", fmt.Errorf("%w: %w: %q is ambiguous: matches %s%s; give more of the id", ErrBadRequest, ErrAmbiguous, q, strings.Join(shown, ", "), more)
}

// ResolveID turns what a user typed for a job (an id, or a unique prefix
// or suffix of one) into the job's id: lookup is asked for q as an exact
// id first (an error other than ErrNotFound is returned as it is), then m
// lists the candidates. It is the one resolver behind every command and
// API route that takes a job id.
func ResolveID(ctx context.Context, q string, lookup func(id string) error, m IDMatcher) (string, error) {
	if q == "" {
		return "", fmt.Errorf("%w: an empty job id", ErrBadRequest)
	}
	err := lookup(q)
	if err == nil {
		return q, nil
	}
	if !errors.Is(err, ErrNotFound) || m == nil {
		return "", err
	}
	ids, err := m.MatchIDs(ctx, q, maxShown+1)
	if err != nil {
		return "", err
	}
	return PickID(q, ids)
}
