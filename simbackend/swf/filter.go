package swf

// StrongFilter is the input filter of the predictsim experiments
// (experiments/data_manipulation/strong_filter_all_swf), which produced the
// job set of the reference EASY schedule. Apply runs its steps in order:
//
//  1. keep jobs with allocated <= MaxProcs and requested <= MaxProcs;
//  2. if only one of allocated (field 5) / requested (field 8) processors is
//     positive, copy it to the other; drop the job if neither is;
//  3. keep run time > 0;
//  4. drop requested time <= 0;
//  5. if requested time < run time, set run time = requested time;
//  6. keep submit >= 0.
//
// On CTC-SP2-1996-3.1-cln with MaxProcs 338 it keeps exactly 77,199 jobs.
type StrongFilter struct {
	MaxProcs int64
}

// Apply filters and repairs j in place; it reports whether to keep it.
func (f StrongFilter) Apply(j *Job) bool {
	if j.Alloc > f.MaxProcs || j.ReqProcs > f.MaxProcs {
		return false
	}
	switch {
	case j.Alloc > 0 && j.ReqProcs <= 0:
		j.ReqProcs = j.Alloc
	case j.ReqProcs > 0 && j.Alloc <= 0:
		j.Alloc = j.ReqProcs
	case j.Alloc <= 0 && j.ReqProcs <= 0:
		return false
	}
	if j.Run <= 0 || j.ReqTime <= 0 {
		return false
	}
	if j.ReqTime < j.Run {
		j.Run = j.ReqTime
	}
	return j.Submit >= 0
}
