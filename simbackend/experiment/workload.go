package experiment

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends/regularfile"
	"github.com/gridsub/gridsub/simbackend/replay"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// TracePath finds a trace: an existing path as given (absolute, or with a
// directory part), else the name inside swf.WorkloadsDir(). The error wraps
// ErrNoTrace and says where it looked.
func TracePath(name string) (string, error) {
	if filepath.IsAbs(name) || strings.ContainsRune(name, os.PathSeparator) {
		if fi, err := os.Stat(name); err == nil {
			if !fi.Mode().IsRegular() {
				return "", fmt.Errorf("%w: %s is %s, not a regular file", ErrNoTrace, name, regularfile.Kind(fi.Mode()))
			}
			return name, nil
		}
	}
	dir, ok := swf.WorkloadsDir()
	env := os.Getenv("GRIDSUB_WORKLOADS")
	where := fmt.Sprintf("looked in %q", dir)
	switch {
	case env != "":
		where = fmt.Sprintf("looked in $GRIDSUB_WORKLOADS=%q", env)
	case dir == "":
		where = "no repository root (go.mod) above the working directory, so no ../shared/workloads either"
	default:
		where = fmt.Sprintf("looked in %q (../shared/workloads beside the repository)", dir)
	}
	if ok {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil {
			if !fi.Mode().IsRegular() {
				return "", fmt.Errorf("%w: %s is %s, not a regular file", ErrNoTrace, p, regularfile.Kind(fi.Mode()))
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s: %s; set GRIDSUB_WORKLOADS to the directory holding the Parallel Workloads Archive traces", ErrNoTrace, name, where)
}

// loadTrace reads the workload's trace, filtered, up to its first Jobs
// jobs.
func loadTrace(w Workload) ([]swf.Job, error) {
	path, err := TracePath(w.Trace)
	if err != nil {
		return nil, err
	}
	r, err := swf.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f := swf.StrongFilter{MaxProcs: w.MaxProcs}
	if w.Filter == "strong" && f.MaxProcs == 0 {
		if f.MaxProcs, err = r.Header.Int("MaxProcs"); err != nil || f.MaxProcs < 1 {
			return nil, fmt.Errorf("%s: the header has no usable MaxProcs; set workload.max_procs", path)
		}
	}
	keep := func(j *swf.Job) bool { return w.Filter != "strong" || f.Apply(j) }
	jobs, err := swf.ReadJobs(r, keep, w.Jobs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%s: no job left after the %s filter", path, w.Filter)
	}
	return jobs, nil
}

// shapeJobs turns filtered trace jobs into one of paper 000's workloads
// (shape 1 or 2) for sites sites.
func shapeJobs(jobs []swf.Job, w Workload, shape, sites int) ([]replay.Job, error) {
	sh, err := swf.Shape(jobs, swf.ShapeOptions{
		N: w.Jobs, WidthCap: w.WidthCap, Sites: sites, Seed: w.Seed,
		Wide90: shape == 2, WideMin: w.Wide[0], WideMax: w.Wide[1],
		SizeMin: int64(math.Round(w.SizeMB[0] * swf.MB)), SizeMax: int64(math.Round(w.SizeMB[1] * swf.MB)),
	})
	if err != nil {
		return nil, err
	}
	out := replay.FromShaped(sh)
	if w.ArrivalScale != 1 {
		for i := range out {
			s := math.Round(out[i].Submit.Seconds() * w.ArrivalScale)
			if s > maxSubmitSeconds {
				return nil, fmt.Errorf("workload.arrival_scale %v puts job %d's submit time at %.3g s, past the %d s a time can hold; use a smaller factor",
					w.ArrivalScale, i, s, int64(maxSubmitSeconds))
			}
			out[i].Submit = time.Duration(s) * time.Second
		}
	}
	return out, nil
}

// maxSubmitSeconds is the latest submit time (in seconds) a time.Duration
// holds, with room to spare for the run after it.
const maxSubmitSeconds = float64(math.MaxInt64/int64(time.Second)) / 2
