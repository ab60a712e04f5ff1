package coalloc

import (
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// A site whose nodes lack what the job asks per node is never chosen, and
// the decision says why; when no site fits, the job is rejected with the
// reason per site. Every planner of the registry obeys it, Quiet or not.
func TestNodeShapeRulesSitesOut(t *testing.T) {
	for _, name := range Names() {
		for _, quiet := range []bool{false, true} {
			s := testbed(1.1)
			// Harbin is the fastest site (h 0.6) and would win, but its
			// nodes have 2 cores; Shanghai's have 4 and one GPU.
			s.Sites[bj].Shape = policy.NodeShape{Cores: 2, MemBytes: 8 << 30}
			s.Sites[sh].Shape = policy.NodeShape{Cores: 4, MemBytes: 16 << 30, GPUs: 1}
			s.Sites[hb].Shape = policy.NodeShape{Cores: 2, MemBytes: 8 << 30}
			s.Quiet = quiet
			fit := job("fit", 4, time.Hour)
			fit.PerNode = policy.NodeShape{Cores: 4}
			gpu := job("gpu", 1, time.Hour)
			gpu.PerNode = policy.NodeShape{GPUs: 2}
			mem := job("mem", 100, time.Hour) // wider than Shanghai: must split, but only Shanghai fits
			mem.PerNode = policy.NodeShape{MemBytes: 12 << 30}
			plain := job("plain", 4, time.Hour)
			s.Queue = []policy.Job{fit, gpu, mem, plain}
			plan := mustPlan(t, name, s)
			d := decisionFor(plan, "fit")
			if d == nil || (d.Action != policy.Start && d.Action != policy.Replicate) || len(d.Chosen.Parts) != 1 || d.Chosen.Parts[0].Site != sh {
				t.Fatalf("%s quiet=%v: fit: %+v, want a start on Shanghai only", name, quiet, d)
			}
			if !quiet && !strings.Contains(d.Status.String(), "Harbin: 2 cores per node, the job asks 4") {
				t.Errorf("%s: fit's reasons do not name Harbin's shape: %s", name, d.Status)
			}
			d = decisionFor(plan, "gpu")
			if d == nil || d.Action != policy.Reject || !strings.Contains(d.Status.String(), "Shanghai: 1 GPUs per node, the job asks 2") ||
				!strings.Contains(d.Status.String(), "Beijing: no GPUs") {
				t.Errorf("%s quiet=%v: gpu: %+v, want a reject naming every site's GPUs", name, quiet, d)
			}
			d = decisionFor(plan, "mem")
			if d == nil || d.Action != policy.Reject || !strings.Contains(d.Status.String(), "needs 100 nodes") {
				t.Errorf("%s quiet=%v: mem: %+v, want a reject (only Shanghai's 64 nodes have the memory)", name, quiet, d)
			}
			if d := decisionFor(plan, "plain"); d != nil && d.Action == policy.Reject {
				t.Errorf("%s: a job asking nothing per node was rejected: %s", name, d.Status)
			}
		}
	}
}

func TestNodeShapeLacks(t *testing.T) {
	cases := []struct {
		site, ask policy.NodeShape
		want      string
	}{
		{policy.NodeShape{}, policy.NodeShape{Cores: 64, MemBytes: 1 << 40}, ""}, // unknown cores and memory: not ruled out
		{policy.NodeShape{}, policy.NodeShape{GPUs: 1}, "no GPUs, the job asks 1 per node"},
		{policy.NodeShape{Cores: 2}, policy.NodeShape{Cores: 2}, ""},
		{policy.NodeShape{Cores: 2, MemBytes: 1 << 30}, policy.NodeShape{Cores: 3, MemBytes: 3 << 29},
			"2 cores per node, the job asks 3; 1GiB memory per node, the job asks 1536MiB"},
		{policy.NodeShape{GPUs: 4}, policy.NodeShape{GPUs: 8}, "4 GPUs per node, the job asks 8"},
	}
	for _, c := range cases {
		if got := c.site.Lacks(c.ask); got != c.want {
			t.Errorf("%+v.Lacks(%+v) = %q, want %q", c.site, c.ask, got, c.want)
		}
	}
}
