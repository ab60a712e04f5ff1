package swf

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// MB is the unit of the shaped data sizes (10^6 bytes).
const MB = 1_000_000

// ShapeOptions turn a filtered trace into paper 000's workloads (SPEC §1,
// Workload 1 and 2).
type ShapeOptions struct {
	N        int    // keep the first N jobs (0 = all)
	WidthCap int64  // cap every width at this many nodes (0 = no cap); 32 in the paper
	Sites    int    // number of sites; SubmitSite is uniform over 0..Sites-1
	Seed     uint64 // every random draw derives from it
	// Wide90 is Workload 2: exactly round(0.9·N) jobs, chosen uniformly at
	// random, get a width uniform in WideMin..WideMax (11..32 when zero).
	Wide90           bool
	WideMin, WideMax int64
	// SizeMin/SizeMax bound the uniform data size in bytes
	// (1 MB..100 MB when zero).
	SizeMin, SizeMax int64
}

// Shaped is one job of a shaped workload.
type Shaped struct {
	Job
	Width      int64 // nodes, after the cap and Workload 2's redraw
	SubmitSite int   // index of the submit site
	Size       int64 // bytes to move with the job
}

// Shape applies o to jobs (already filtered, in file order). Draw order is
// fixed (for each job: site, then size; then Workload 2's choice and widths),
// so the same jobs and seed always give the same workload.
func Shape(jobs []Job, o ShapeOptions) ([]Shaped, error) {
	sh, err := newShaper(o)
	if err != nil {
		return nil, err
	}
	n := len(jobs)
	if o.N > 0 && o.N < n {
		n = o.N
	}
	out := make([]Shaped, n)
	for i := range out {
		out[i] = sh.next(&jobs[i])
	}
	if o.Wide90 {
		k := (9*n + 5) / 10
		for _, i := range sh.rng.Perm(n)[:k] {
			out[i].Width = sh.o.WideMin + sh.rng.Int64N(sh.o.WideMax-sh.o.WideMin+1)
		}
	}
	return out, nil
}

// Shaper shapes a workload one job at a time, as it is read, with exactly
// Shape's draws: Workload 1 (and any shaping without Wide90), whose draws
// for a job depend on the jobs before it only. Workload 2 picks its wide
// jobs among all of them, so it needs Shape.
type Shaper struct {
	sh   *shaper
	seen int
}

// NewShaper starts shaping with o; o.Wide90 is refused (ErrNeedsAll).
func NewShaper(o ShapeOptions) (*Shaper, error) {
	if o.Wide90 {
		return nil, fmt.Errorf("swf: shape: %w", ErrNeedsAll)
	}
	sh, err := newShaper(o)
	if err != nil {
		return nil, err
	}
	return &Shaper{sh: sh}, nil
}

// ErrNeedsAll: a shaping that draws among all the jobs (Workload 2) cannot
// shape them one at a time.
var ErrNeedsAll = errors.New("Workload 2 (wide90) chooses among all jobs: it cannot be shaped as the trace is read")

// Next shapes the next job (filtered, in file order); ok is false once
// ShapeOptions.N jobs have been shaped.
func (s *Shaper) Next(j *Job) (out Shaped, ok bool) {
	if s.sh.o.N > 0 && s.seen >= s.sh.o.N {
		return Shaped{}, false
	}
	s.seen++
	return s.sh.next(j), true
}

// shaper holds the checked options and the one random stream of a shaping.
type shaper struct {
	o   ShapeOptions
	rng *rand.Rand
}

func newShaper(o ShapeOptions) (*shaper, error) {
	if o.Sites < 1 {
		return nil, fmt.Errorf("swf: shape: sites must be >= 1, got %d", o.Sites)
	}
	if o.N < 0 || o.WidthCap < 0 {
		return nil, fmt.Errorf("swf: shape: N and WidthCap must be >= 0 (got %d, %d)", o.N, o.WidthCap)
	}
	if o.WideMin == 0 && o.WideMax == 0 {
		o.WideMin, o.WideMax = 11, 32
	}
	if o.SizeMin == 0 && o.SizeMax == 0 {
		o.SizeMin, o.SizeMax = 1*MB, 100*MB
	}
	if o.WideMin < 1 || o.WideMax < o.WideMin || o.SizeMin < 0 || o.SizeMax < o.SizeMin {
		return nil, fmt.Errorf("swf: shape: need 1 <= WideMin <= WideMax and 0 <= SizeMin <= SizeMax")
	}
	return &shaper{o: o, rng: rand.New(rand.NewPCG(o.Seed, 0x5eed5eed))}, nil
}

// next shapes one job: the width cap, then the site and size draws.
func (s *shaper) next(j *Job) Shaped {
	w := j.Width()
	if s.o.WidthCap > 0 && w > s.o.WidthCap {
		w = s.o.WidthCap
	}
	return Shaped{Job: *j, Width: w, SubmitSite: s.rng.IntN(s.o.Sites), Size: s.o.SizeMin + s.rng.Int64N(s.o.SizeMax-s.o.SizeMin+1)}
}
