package leastloaded

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func site(name string, nodes, free int) policy.Site {
	return policy.Site{Name: name, Nodes: nodes, Free: free, H: 1}
}

func job(id string, width int) policy.Job {
	return policy.Job{ID: id, Width: width, Estimate: time.Hour, Submit: t0, Origin: -1}
}

// outcome is a plan in one line per queued job: "id start site", "id
// reject", "id wait: reason".
func outcome(s *policy.Snapshot, p *policy.Plan) []string {
	var out []string
	for _, d := range p.Decisions {
		switch d.Action {
		case policy.Start:
			out = append(out, d.Job+" start "+s.Sites[d.Chosen.Parts[0].Site].Name)
		default:
			out = append(out, d.Job+" "+d.Action.String())
		}
	}
	for _, w := range p.Pending {
		out = append(out, w.Job+" wait")
	}
	return out
}

func TestPlanTable(t *testing.T) {
	for _, c := range []struct {
		name  string
		sites []policy.Site
		queue []policy.Job
		want  []string // decisions in queue order, then the waiting jobs
		says  map[string]string
	}{
		{
			name:  "most free nodes wins",
			sites: []policy.Site{site("A", 10, 3), site("B", 20, 8), site("C", 8, 5)},
			queue: []policy.Job{job("j1", 2)},
			want:  []string{"j1 start B"},
			says:  map[string]string{"j1": "B has 8 of 20 nodes free (60% busy)"},
		},
		{
			name:  "free nodes are counted down within a plan",
			sites: []policy.Site{site("A", 10, 6), site("B", 10, 5)},
			queue: []policy.Job{job("j1", 2), job("j2", 2), job("j3", 2)},
			want:  []string{"j1 start A", "j2 start B", "j3 start A"},
		},
		{
			name:  "tie on free nodes: the lower load ratio",
			sites: []policy.Site{site("big", 100, 4), site("small", 8, 4)},
			queue: []policy.Job{job("j1", 1)},
			want:  []string{"j1 start small"},
		},
		{
			name:  "tie on free nodes and load: site order",
			sites: []policy.Site{site("A", 8, 4), site("B", 8, 4)},
			queue: []policy.Job{job("j1", 1)},
			want:  []string{"j1 start A"},
		},
		{
			name:  "no single site can ever hold it: rejected, the queue goes on",
			sites: []policy.Site{site("A", 16, 16), site("B", 16, 16)},
			queue: []policy.Job{job("wide", 20), job("j2", 4)},
			want:  []string{"wide reject", "j2 start A"},
			says:  map[string]string{"wide": "needs 20 nodes on one site (least-loaded places a job on a single site); the largest allowed site is A with 16"},
		},
		{
			name:  "does not fit now: waits, and the jobs behind it wait (FCFS)",
			sites: []policy.Site{site("A", 16, 3), site("B", 16, 6)},
			queue: []policy.Job{job("j1", 8), job("j2", 1), job("wide", 40)},
			want:  []string{"wide reject", "j1 wait", "j2 wait"},
			says: map[string]string{"j1": "needs 8 free nodes on one site; the most now: B with 6 (A 3/16, B 6/16 free)",
				"j2": "waits behind job j1 (first come, first served)"},
		},
		{
			name:  "down sites take nothing; a job only they can hold waits without holding others up",
			sites: []policy.Site{{Name: "A", Nodes: 32, Free: 32, H: 1, Down: true}, site("B", 8, 8)},
			queue: []policy.Job{job("big", 16), job("j2", 8)},
			want:  []string{"j2 start B", "big wait"},
			says:  map[string]string{"big": "every site that can hold its 16 nodes is down: A"},
		},
		{
			name:  "allowed sites restrict the choice",
			sites: []policy.Site{site("A", 16, 16), site("B", 16, 2)},
			queue: []policy.Job{{ID: "j1", Width: 2, Estimate: time.Hour, Origin: -1, Allowed: []int{1}}},
			want:  []string{"j1 start B"},
		},
		{
			name:  "malformed requests are rejected with the reason",
			sites: []policy.Site{site("A", 16, 16)},
			queue: []policy.Job{job("zero", 0), {ID: "origin", Width: 1, Origin: 5}, {ID: "allowed", Width: 1, Origin: -1, Allowed: []int{3}},
				{ID: "none", Width: 1, Origin: -1, Allowed: []int{}}},
			want: []string{"zero reject", "origin reject", "allowed reject", "none reject"},
			says: map[string]string{"zero": "at least 1 node", "origin": "origin site 5 does not exist", "allowed": "allowed site 3 does not exist",
				"none": "no site is allowed"},
		},
		{
			name:  "an empty grid rejects everything",
			sites: nil,
			queue: []policy.Job{job("j1", 1)},
			want:  []string{"j1 reject"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: t0, Sites: c.sites, Queue: c.queue}
			p, err := New().Plan(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcome(s, p); !reflect.DeepEqual(got, c.want) {
				t.Errorf("plan %q, want %q", got, c.want)
			}
			reasons := map[string]policy.Status{}
			for _, d := range p.Decisions {
				reasons[d.Job] = d.Status
			}
			for _, w := range p.Pending {
				reasons[w.Job] = w.Status
			}
			for id, want := range c.says {
				st := reasons[id]
				if st.Plugin != Name || !strings.Contains(st.String(), want) {
					t.Errorf("job %s: %q by %q, want it to say %q", id, st, st.Plugin, want)
				}
			}
		})
	}
}

// TestStartOption: a start carries the snapshot's run-time and transfer
// predictions (the broker's walltime comes from them) and the runners-up.
func TestStartOption(t *testing.T) {
	s := &policy.Snapshot{Now: t0, MultiSite: 1.2,
		Sites:   []policy.Site{{Name: "A", Nodes: 8, Free: 8, H: 1.5}, {Name: "B", Nodes: 8, Free: 6, H: 1}, {Name: "C", Nodes: 8, Free: 2, H: 1}},
		Uplinks: []policy.Link{{SecPerByte: 1e-6, Latency: time.Second}, {}, {}},
		Queue:   []policy.Job{{ID: "j", Width: 4, Estimate: time.Hour, Origin: -1, DataSize: 1e6}}}
	p, err := New().Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	d := p.Decisions[0]
	if d.Chosen.Parts[0] != (policy.Part{Site: 0, Nodes: 4}) || !d.Chosen.Start.Equal(t0) || !d.Chosen.Immediate {
		t.Fatalf("chosen %+v", d.Chosen)
	}
	if d.Chosen.Runtime != 90*time.Minute || d.Chosen.Transfer != 2*time.Second {
		t.Errorf("runtime %s transfer %s, want 1h30m (h = 1.5) and 2s (1 MB at 1 µs/B + 1 s)", d.Chosen.Runtime, d.Chosen.Transfer)
	}
	if len(d.Beaten) != 1 || d.Beaten[0].Parts[0].Site != 1 || d.Beaten[0].Runtime != time.Hour {
		t.Errorf("beaten %+v, want B alone (C has too few free nodes)", d.Beaten)
	}
	s.Quiet = true
	q, _ := New().Plan(context.Background(), s)
	if len(q.Decisions[0].Beaten) != 0 || q.Decisions[0].Chosen.Runtime != d.Chosen.Runtime {
		t.Errorf("quiet decision %+v", q.Decisions[0])
	}
}

func TestBadSnapshotAndContext(t *testing.T) {
	for _, st := range []policy.Site{site("A", 4, 5), site("A", 4, -1), site("A", -1, 0)} {
		_, err := New().Plan(context.Background(), &policy.Snapshot{Sites: []policy.Site{st}})
		if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "A") {
			t.Errorf("site %+v: %v, want ErrBadSnapshot naming the site", st, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &policy.Snapshot{Sites: []policy.Site{site("A", 4, 4)}, Queue: []policy.Job{job("j", 1)}}
	if _, err := New().Plan(ctx, s); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

// genSnapshot draws a small grid (some sites down, some with zero nodes)
// and a queue with widths up to past the largest site, some origins and
// allowed lists malformed.
func genSnapshot(t *rapid.T) *policy.Snapshot {
	n := rapid.IntRange(0, 5).Draw(t, "sites")
	s := &policy.Snapshot{Now: t0, MultiSite: 1.1, Quiet: rapid.Bool().Draw(t, "quiet")}
	largest := 0
	for i := 0; i < n; i++ {
		nodes := rapid.IntRange(0, 40).Draw(t, "nodes")
		s.Sites = append(s.Sites, policy.Site{Name: fmt.Sprintf("s%d", i), Nodes: nodes, Free: rapid.IntRange(0, nodes).Draw(t, "free"),
			H: rapid.SampledFrom([]float64{0.5, 1, 2}).Draw(t, "h"), Down: rapid.IntRange(0, 5).Draw(t, "down") == 0})
		largest = max(largest, nodes)
	}
	q := rapid.IntRange(0, 25).Draw(t, "queue")
	for k := 0; k < q; k++ {
		j := policy.Job{ID: fmt.Sprintf("j%d", k), Width: rapid.IntRange(0, largest+3).Draw(t, "width"),
			Estimate: time.Duration(rapid.IntRange(1, 1e5).Draw(t, "est")) * time.Second, Submit: t0,
			Origin: rapid.IntRange(-1, n).Draw(t, "origin")} // n: a site that does not exist
		if rapid.IntRange(0, 3).Draw(t, "restrict") == 0 {
			j.Allowed = []int{}
			for i := 0; i <= n; i++ {
				if rapid.IntRange(0, 2).Draw(t, "allow") == 0 {
					j.Allowed = append(j.Allowed, i)
				}
			}
		}
		s.Queue = append(s.Queue, j)
	}
	return s
}

// TestPlanProperties: on random grids, a plan never over-commits a site,
// gives each queued job at most one decision (exactly one decision or one
// Pending entry when not Quiet), starts a job only on an allowed up site
// with the most free nodes left, rejects only what no allowed site can
// ever hold, never lets a job overtake one that waits for nodes, is
// deterministic, and Quiet changes no Start or Reject.
func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		orig := fmt.Sprintf("%+v", *s)
		p, err := New().Plan(context.Background(), s)
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		if fmt.Sprintf("%+v", *s) != orig {
			t.Fatal("Plan modified the snapshot")
		}
		left := make([]int, len(s.Sites))
		for i := range s.Sites {
			left[i] = s.Sites[i].Free
		}
		index := map[string]int{}
		for i, j := range s.Queue {
			index[j.ID] = i
		}
		seen := map[string]int{}
		var started []int
		for _, d := range p.Decisions {
			qi, ok := index[d.Job]
			if !ok {
				t.Fatalf("decision for %s, which is not queued", d.Job)
			}
			seen[d.Job]++
			j := &s.Queue[qi]
			allowed := func(i int) bool { return j.Allowed == nil || containsInt(j.Allowed, i) }
			switch d.Action {
			case policy.Start:
				if len(d.Chosen.Parts) != 1 || d.Chosen.Parts[0].Nodes != j.Width {
					t.Fatalf("job %s (width %d): parts %+v, want one part of its width", j.ID, j.Width, d.Chosen.Parts)
				}
				x := d.Chosen.Parts[0].Site
				if s.Sites[x].Down || !allowed(x) {
					t.Fatalf("job %s started on down or disallowed site %d", j.ID, x)
				}
				for i := range s.Sites {
					if i != x && allowed(i) && !s.Sites[i].Down && s.Sites[i].Nodes >= j.Width && left[i] > left[x] {
						t.Fatalf("job %s went to %s with %d free, but %s had %d", j.ID, s.Sites[x].Name, left[x], s.Sites[i].Name, left[i])
					}
				}
				left[x] -= j.Width
				if left[x] < 0 {
					t.Fatalf("site %s over-committed by job %s", s.Sites[x].Name, j.ID)
				}
				started = append(started, qi)
			case policy.Reject:
				if d.Status.Code != policy.Unresolvable || len(d.Status.Reasons) == 0 {
					t.Fatalf("reject of %s without a reason: %+v", j.ID, d.Status)
				}
				if h := holder(s, j); h >= 0 {
					t.Fatalf("job %s rejected though %s can hold it: %s", j.ID, s.Sites[h].Name, d.Status)
				}
			default:
				t.Fatalf("action %s", d.Action)
			}
		}
		firstWait := -1
		for _, w := range p.Pending {
			if _, ok := index[w.Job]; !ok {
				t.Fatalf("pending entry for %s, which is not queued", w.Job)
			}
			seen[w.Job]++
			if w.Status.Code != policy.Unschedulable || len(w.Status.Reasons) == 0 || w.Status.Reasons[0] == "" {
				t.Fatalf("pending %s without a reason: %+v", w.Job, w.Status)
			}
			if strings.HasPrefix(w.Status.Reasons[0], "needs") && firstWait < 0 {
				firstWait = index[w.Job]
			}
		}
		rejected := map[string]bool{}
		for _, d := range p.Decisions {
			rejected[d.Job] = d.Action == policy.Reject
		}
		for qi := range s.Queue {
			j := &s.Queue[qi]
			if seen[j.ID] > 1 || (!s.Quiet && seen[j.ID] != 1) {
				t.Fatalf("job %s has %d decisions and pending entries (quiet %v)", j.ID, seen[j.ID], s.Quiet)
			}
			if holder(s, j) < 0 && !rejected[j.ID] {
				t.Fatalf("job %s (width %d, origin %d, allowed %v) can never run but is not rejected", j.ID, j.Width, j.Origin, j.Allowed)
			}
		}
		for _, qi := range started {
			if firstWait >= 0 && qi > firstWait {
				t.Fatalf("job %s started ahead of %s, which waits for nodes", s.Queue[qi].ID, s.Queue[firstWait].ID)
			}
		}
		again, _ := New().Plan(context.Background(), s)
		if !reflect.DeepEqual(p, again) {
			t.Fatal("two plans of one snapshot differ")
		}
		flip := *s
		flip.Quiet = !s.Quiet
		other, err := New().Plan(context.Background(), &flip)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(acting(p), acting(other)) {
			t.Fatalf("Quiet changed the decisions:\n%v\n%v", acting(p), acting(other))
		}
	})
}

// holder is a site that can ever hold a well-formed job alone (-1: none,
// or the job is malformed).
func holder(s *policy.Snapshot, j *policy.Job) int {
	if j.Width < 1 || j.Origin < -1 || j.Origin >= len(s.Sites) {
		return -1
	}
	allowed := j.Allowed
	if allowed == nil {
		for i := range s.Sites {
			allowed = append(allowed, i)
		}
	}
	for _, i := range allowed {
		if i < 0 || i >= len(s.Sites) {
			return -1
		}
	}
	for _, i := range allowed {
		if s.Sites[i].Nodes >= j.Width {
			return i
		}
	}
	return -1
}

func containsInt(l []int, x int) bool {
	for _, v := range l {
		if v == x {
			return true
		}
	}
	return false
}

// acting is what a plan does: jobs, actions, parts.
func acting(p *policy.Plan) []string {
	var out []string
	for _, d := range p.Decisions {
		out = append(out, fmt.Sprintf("%s %s %v", d.Job, d.Action, d.Chosen.Parts))
	}
	return out
}
