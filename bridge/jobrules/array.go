package jobrules

import (
	"strconv"
	"strings"
)

// Limits of job arrays, sweeps, pipelines and dependencies.
const (
	MaxElements   = 10000   // elements of one array or sweep (and steps of one pipeline)
	MaxArrayIndex = 9999999 // largest array index
	MaxSteps      = 100     // steps of one pipeline
	MaxDeps       = 100     // job ids one job may depend on
)

// Array is a parsed array spec: the element indices, in the order given
// (ascending within each range), and how many elements may be unfinished
// at once (0: no limit).
type Array struct {
	Indices []int
	Limit   int
}

// ParseArray parses an array spec in SLURM's syntax: a comma-separated
// list of indices N and ranges A-B or A-B:S (every S-th from A to B),
// optionally followed by %K, at most K elements at once:
// "1-100%10", "0,4,10-20:2", "1-5". Indices are 0..MaxArrayIndex, each at
// most once, at most MaxElements in all; K is 1..MaxElements.
func ParseArray(spec string) (Array, error) {
	var a Array
	s := strings.TrimSpace(spec)
	if s == "" {
		return a, bad(ErrValue, `is empty; give indices like "1-100" or "1-100%%10" (at most 10 at once)`)
	}
	if i := strings.IndexByte(s, '%'); i >= 0 {
		k, err := strconv.Atoi(s[i+1:])
		if err != nil || k < 1 || k > MaxElements {
			return a, bad(ErrValue, "%q: the limit after %% must be a whole number from 1 to %d", spec, MaxElements)
		}
		a.Limit, s = k, s[:i]
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		from, to, step, err := arrayRange(strings.TrimSpace(part))
		if err != nil {
			return Array{}, bad(ErrValue, "%q: %v", spec, err)
		}
		for i := from; i <= to; i += step {
			if seen[i] {
				return Array{}, bad(ErrValue, "%q: index %d is given twice", spec, i)
			}
			if len(a.Indices) == MaxElements {
				return Array{}, bad(ErrValue, "%q: more than %d elements; split the array", spec, MaxElements)
			}
			seen[i] = true
			a.Indices = append(a.Indices, i)
		}
	}
	return a, nil
}

type rangeError string

func (e rangeError) Error() string { return string(e) }

func arrayRange(p string) (from, to, step int, err error) {
	num := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxArrayIndex || strings.HasPrefix(s, "+") {
			return 0, rangeError(strconv.Quote(s) + " is not an index (a whole number from 0 to " + strconv.Itoa(MaxArrayIndex) + ")")
		}
		return n, nil
	}
	if p == "" {
		return 0, 0, 0, rangeError("an empty item between commas")
	}
	step = 1
	if i := strings.IndexByte(p, ':'); i >= 0 {
		st, e := strconv.Atoi(p[i+1:])
		if e != nil || st < 1 || st > MaxArrayIndex {
			return 0, 0, 0, rangeError("the step after ':' in " + strconv.Quote(p) + " must be a whole number from 1")
		}
		step, p = st, p[:i]
		if !strings.Contains(p, "-") {
			return 0, 0, 0, rangeError("a step needs a range (A-B:S)")
		}
	}
	a, b, isRange := strings.Cut(p, "-")
	if from, err = num(a); err != nil {
		return 0, 0, 0, err
	}
	to = from
	if isRange {
		if to, err = num(b); err != nil {
			return 0, 0, 0, err
		}
		if to < from {
			return 0, 0, 0, rangeError("the range " + strconv.Quote(p) + " runs backwards")
		}
	}
	if (to-from)/step >= MaxElements {
		return 0, 0, 0, rangeError("the range " + strconv.Quote(p) + " has more than " + strconv.Itoa(MaxElements) + " elements; split the array")
	}
	return from, to, step, nil
}

// SweepSize checks the sizes of a sweep's value lists and returns the
// number of elements (their product): each list holds 1..MaxElements
// values, the product at most MaxElements.
func SweepSize(sizes []int) (int, error) {
	if len(sizes) == 0 {
		return 0, bad(ErrValue, "names no parameter; give at least one, like {ALPHA: [\"0.1\", \"0.2\"]}")
	}
	n := 1
	for _, k := range sizes {
		if k < 1 {
			return 0, bad(ErrValue, "a parameter has no values")
		}
		n *= k
		if n > MaxElements {
			return 0, bad(ErrValue, "the product of the parameters' values is more than %d elements", MaxElements)
		}
	}
	return n, nil
}

// SweepValues returns the values of element i of a sweep over lists of
// the given sizes, as positions in each list: the last parameter varies
// fastest (mixed radix).
func SweepValues(sizes []int, i int) []int {
	out := make([]int, len(sizes))
	for k := len(sizes) - 1; k >= 0; k-- {
		out[k] = i % sizes[k]
		i /= sizes[k]
	}
	return out
}

// StepName checks a pipeline step's name: a job name (Name) that is not
// also a job id the dependencies could mean (it must not be all digits).
func StepName(s string) error {
	if err := Name(s); err != nil {
		return err
	}
	if strings.Trim(s, "0123456789") == "" {
		return bad(ErrValue, "%q is only digits; a step name needs a letter", s)
	}
	return nil
}

// UniqueStrings reports the first string given twice, or "".
func UniqueStrings(ss []string) string {
	seen := make(map[string]bool, len(ss))
	for _, s := range ss {
		if seen[s] {
			return s
		}
		seen[s] = true
	}
	return ""
}
