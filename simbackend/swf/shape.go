package swf

import (
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
	n := len(jobs)
	if o.N > 0 && o.N < n {
		n = o.N
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed5eed))
	out := make([]Shaped, n)
	for i := range out {
		w := jobs[i].Width()
		if o.WidthCap > 0 && w > o.WidthCap {
			w = o.WidthCap
		}
		out[i] = Shaped{
			Job:        jobs[i],
			Width:      w,
			SubmitSite: rng.IntN(o.Sites),
			Size:       o.SizeMin + rng.Int64N(o.SizeMax-o.SizeMin+1),
		}
	}
	if o.Wide90 {
		k := (9*n + 5) / 10
		for _, i := range rng.Perm(n)[:k] {
			out[i].Width = o.WideMin + rng.Int64N(o.WideMax-o.WideMin+1)
		}
	}
	return out, nil
}
