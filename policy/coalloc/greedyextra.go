package coalloc

import (
	"slices"

	"github.com/gridsub/gridsub/policy"
)

// extras lists, in ascending site order, the eligible sites a job names
// that Algorithm 3's windows may never look at: Algorithm 3 evaluates only
// the fastest sites that hold the job, so a one-site job would otherwise go
// to the fastest free site whatever it says. They are its preferred sites
// ("sites that win ties": evaluated alone, a preferred site wins when it
// completes no later than the greedy choice, by the Collector's order)
// and, when Local is set, its origin when input must move from there (the
// site where the data is: its completion has no transfer). A job naming
// neither gets exactly Algorithm 3. buf is reused.
func (g Greedy) extras(j *policy.Job, sites []int, buf []int) []int {
	buf = buf[:0]
	for _, s := range sites {
		if slices.Contains(j.Preferred, s) || g.Local && j.DataSize > 0 && s == j.Origin {
			buf = append(buf, s)
		}
	}
	slices.Sort(buf)
	return buf
}
