package experiment

import (
	"fmt"
	"slices"
	"strconv"
)

// Subset narrows a co-allocation experiment to some of its seeds and
// workloads (gridsub sim --seeds, --workload): a long experiment can be run
// in parts, or a few seeds of it. seeds replace sweep.seed (any values);
// workloads must be among the file's. Plots and comparisons pinned to a
// workload left out are dropped, since they would have no runs. Nil or
// empty lists leave the experiment as it is.
func (e *Experiment) Subset(seeds []uint64, workloads []int) error {
	if len(seeds) == 0 && len(workloads) == 0 {
		return nil
	}
	if e.Kind != KindCoalloc {
		return fmt.Errorf("%w: --seeds and --workload apply to co-allocation experiments only (this one is %q)", ErrValue, e.Kind)
	}
	if len(seeds) > 0 {
		for i, s := range seeds {
			if slices.Index(seeds, s) != i {
				return fmt.Errorf("%w: seed %d listed twice", ErrValue, s)
			}
		}
		if len(seeds) > maxList {
			return fmt.Errorf("%w: %d seeds: at most %d", ErrValue, len(seeds), maxList)
		}
		e.Sweep.Seed = slices.Clone(seeds)
	}
	if len(workloads) > 0 {
		have := e.axisWorkload()
		for i, w := range workloads {
			if !slices.Contains(have, w) {
				return fmt.Errorf("%w: workload %d is not among the experiment's (%v)", ErrValue, w, have)
			}
			if slices.Index(workloads, w) != i {
				return fmt.Errorf("%w: workload %d listed twice", ErrValue, w)
			}
		}
		e.Sweep.Workload = slices.Clone(workloads)
		kept := func(where map[string]string) bool {
			v, ok := where["workload"]
			n, err := strconv.Atoi(v)
			return !ok || (err == nil && slices.Contains(workloads, n))
		}
		e.Plots = slices.DeleteFunc(e.Plots, func(p Plot) bool { return !kept(p.Where) })
		e.Compare = slices.DeleteFunc(e.Compare, func(c Compare) bool { return !kept(c.Where) })
	}
	return nil
}
