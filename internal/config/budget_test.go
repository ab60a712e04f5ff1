package config

import (
	"strings"
	"testing"
	"time"
)

// TestSiteBudget: a slurm/pbs site's budget block is checked where it is
// read — on a site that runs no scheduler commands, with a negative field,
// a slow poll faster than the fast one, or a fast poll faster than the
// broker's cycle, the error names the field.
func TestSiteBudget(t *testing.T) {
	c := parseBuiltin(t, "local-pbs.yaml", testbedEnv)
	c.Sites[0].Budget = &Budget{PerMinute: 12, PollFast: 5 * time.Second, PollSlow: time.Minute}
	if err := c.validate(); err != nil {
		t.Fatalf("a good budget: %v", err)
	}
	for _, tc := range []struct {
		b    Budget
		kind string
		want string
	}{
		{Budget{PerMinute: -1}, KindPBS, "sites[0].budget"},
		{Budget{PollFast: time.Minute, PollSlow: 10 * time.Second}, KindPBS, "budget.poll_slow"},
		{Budget{PollFast: time.Millisecond}, KindPBS, "budget.poll_fast"},
		{Budget{PerMinute: 6}, KindSim, "only slurm and pbs sites"},
	} {
		c2 := *c
		c2.Sites = append([]Site(nil), c.Sites...)
		b := tc.b
		c2.Sites[0].Budget = &b
		if tc.kind == KindSim {
			c2.Sites[0] = Site{Name: "s", Kind: KindSim, Nodes: 2, CoresPerNode: 1, H: 1, Budget: &b}
		}
		if err := c2.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("budget %+v on a %s site: %v, want an error naming %q", tc.b, tc.kind, err, tc.want)
		}
	}
}
