package dependable

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/coalloc"
)

// flaky returns a predictor where site "flaky" fails every 30 minutes and
// the others never failed.
func flaky(t testing.TB, now time.Time) *Predictor {
	p, _ := NewPredictor(Config{Threshold: time.Minute})
	at := now.Add(-10 * time.Hour)
	p.Observe("flaky", Up, at)
	for at.Before(now.Add(-30 * time.Minute)) {
		at = at.Add(30 * time.Minute)
		if err := p.Observe("flaky", Fail, at); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func site(name string, nodes, free int, h float64) policy.Site {
	return policy.Site{Name: name, Nodes: nodes, Free: free, H: h, Busy: []policy.Hold{{Nodes: nodes - free, Until: epoch.Add(time.Hour)}}}
}

func TestPlannerPrefersReliableSite(t *testing.T) {
	s := &policy.Snapshot{Now: epoch, Sites: []policy.Site{site("flaky", 4, 4, 0.5), site("steady", 4, 4, 1)},
		Queue: []policy.Job{{ID: "j1", Width: 1, Estimate: time.Hour, Submit: epoch}}}
	rel := flaky(t, epoch)
	for _, c := range []struct {
		mode string
		want string
	}{{DGJS, "steady"}, {Refine, "steady"}, {MinMin, "flaky"}} {
		p := &Planner{Mode: c.mode, Rel: rel}
		plan, err := p.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Decisions) != 1 || plan.Decisions[0].Action != policy.Start {
			t.Fatalf("%s: %+v", c.mode, plan)
		}
		d := plan.Decisions[0]
		if got := s.Sites[d.Chosen.Parts[0].Site].Name; got != c.want {
			t.Errorf("%s chose %s, want %s (%s)", c.mode, got, c.want, d.Status)
		}
		if len(d.Beaten) != 1 {
			t.Errorf("%s: want the other site as runner-up, got %+v", c.mode, d.Beaten)
		}
	}
	// The flaky site (fails every 30 min, up for 0 so far... its last
	// failure was at most 30 min ago) has r = 0 for an hour's job at h 0.5
	// (30 min) plus its age; the steady one r = 1, RC 0.
	plan, _ := (&Planner{Rel: rel}).Plan(context.Background(), s)
	if why := plan.Decisions[0].Status.String(); !strings.Contains(why, "steady: RC 0s = (1 − r 1.0000)") || !strings.Contains(why, "no deadline") {
		t.Errorf("reasons: %s", why)
	}
}

func TestPlannerDeadlineAndTiers(t *testing.T) {
	s := &policy.Snapshot{Now: epoch, Sites: []policy.Site{site("fast", 1, 1, 0.5), site("slow", 1, 1, 2)},
		Queue: []policy.Job{
			{ID: "none", Width: 1, Estimate: time.Hour, Submit: epoch},
			{ID: "low", Width: 1, Estimate: time.Hour, Submit: epoch, Deadline: epoch.Add(10 * time.Hour)},
			{ID: "high", Width: 1, Estimate: time.Hour, Submit: epoch, Deadline: epoch.Add(40 * time.Minute)},
			{ID: "late", Width: 1, Estimate: time.Hour, Submit: epoch, Deadline: epoch.Add(10 * time.Minute)},
			{ID: "wide", Width: 5, Estimate: time.Hour, Submit: epoch},
		}}
	plan, err := (&Planner{}).Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range plan.Decisions {
		where := ""
		if len(d.Chosen.Parts) > 0 {
			where = "@" + s.Sites[d.Chosen.Parts[0].Site].Name
		}
		got = append(got, d.Job+":"+d.Action.String()+where)
	}
	// high first (fast: 30 min ≤ 40); low's least CT (RC 0 everywhere
	// without failures) is then to wait 30 min for fast (1 h < slow's 2 h),
	// as is none's; late can meet its deadline nowhere; wide is rejected.
	want := []string{"high:start@fast", "wide:reject"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	pend := map[string]string{}
	for _, p := range plan.Pending {
		pend[p.Job] = p.Status.String()
	}
	if !strings.Contains(pend["late"], "deadline") || !strings.Contains(pend["none"], "free in") || !strings.Contains(pend["low"], "at fast, where 1 nodes are free in 30m0s") {
		t.Fatalf("pending: %v", pend)
	}
	if !strings.Contains(plan.Decisions[0].Status.String(), "tight deadline, tier high") {
		t.Errorf("high's reasons: %s", plan.Decisions[0].Status)
	}
	// An explicit tier wins over the deadline's.
	p := &Planner{TierOf: func(j *policy.Job) (QoS, bool) { return High, j.ID == "none" }}
	plan, _ = p.Plan(context.Background(), s)
	if plan.Decisions[0].Job != "none" || !strings.Contains(plan.Decisions[0].Status.String(), "as the job asks") {
		t.Fatalf("explicit high first: %+v", plan.Decisions[0])
	}
}

func TestRankedReordersCoallocPlacements(t *testing.T) {
	inner, err := coalloc.ByName("single-site-easy")
	if err != nil {
		t.Fatal(err)
	}
	s := &policy.Snapshot{Now: epoch, Sites: []policy.Site{site("flaky", 4, 4, 0.5), site("steady", 4, 4, 1)},
		Queue: []policy.Job{{ID: "j1", Width: 2, Estimate: time.Hour, Submit: epoch, Origin: -1}}}
	plain, _ := inner.Plan(context.Background(), s)
	if got := plain.Decisions[0].Chosen.Parts[0].Site; got != 0 {
		t.Fatalf("single-site picks the fast site 0, got %d", got)
	}
	r := &Ranked{Inner: inner, Rel: flaky(t, epoch)}
	plan, err := r.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	d := plan.Decisions[0]
	if d.Action != policy.Start || d.Chosen.Parts[0].Site != 1 || !strings.Contains(d.Status.String(), "ranked by reliability cost") {
		t.Fatalf("ranked: %+v", d)
	}
	// Without failures RC is 0 everywhere and the inner order stands.
	r.Rel = nil
	plan, _ = r.Plan(context.Background(), s)
	if plan.Decisions[0].Chosen.Parts[0].Site != 0 {
		t.Fatalf("no failures: the inner choice must stand")
	}
}

// TestPropertyPlanner: every mode's Start parts fit the free nodes, each
// queued job gets at most one decision, a rejected job is wider than
// every allowed site, DGJS starts meet their deadline, and equal inputs
// give equal plans.
func TestPropertyPlanner(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "sites")
		s := &policy.Snapshot{Now: epoch.Add(24 * time.Hour)}
		pred, _ := NewPredictor(Config{Threshold: time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "thr"))})
		for i := range n {
			nodes := rapid.IntRange(1, 8).Draw(t, "nodes")
			free := rapid.IntRange(0, nodes).Draw(t, "free")
			st := policy.Site{Name: fmt.Sprintf("s%d", i), Nodes: nodes, Free: free, H: rapid.Float64Range(0.3, 3).Draw(t, "h"),
				Down: rapid.IntRange(0, 5).Draw(t, "down") == 0}
			for left := nodes - free; left > 0; {
				k := rapid.IntRange(1, left).Draw(t, "hold")
				st.Busy = append(st.Busy, policy.Hold{Nodes: k, Until: s.Now.Add(time.Duration(rapid.IntRange(1, 600).Draw(t, "until")) * time.Minute)})
				left -= k
			}
			s.Sites = append(s.Sites, st)
			at := epoch
			pred.Observe(st.Name, Up, at)
			for range rapid.IntRange(0, 6).Draw(t, "fails") {
				at = at.Add(time.Duration(rapid.IntRange(1, 300).Draw(t, "ttf")) * time.Minute)
				pred.Observe(st.Name, Fail, at)
			}
		}
		for k := range rapid.IntRange(0, 12).Draw(t, "jobs") {
			j := policy.Job{ID: fmt.Sprintf("j%d", k), Width: rapid.IntRange(1, 9).Draw(t, "w"), Origin: -1,
				Estimate: time.Duration(rapid.IntRange(1, 300).Draw(t, "est")) * time.Minute, Submit: s.Now}
			if rapid.Bool().Draw(t, "dl") {
				j.Deadline = s.Now.Add(time.Duration(rapid.IntRange(1, 900).Draw(t, "dlm")) * time.Minute)
			}
			s.Queue = append(s.Queue, j)
		}
		mode := rapid.SampledFrom(Modes()).Draw(t, "mode")
		s.Quiet = rapid.Bool().Draw(t, "quiet")
		p := &Planner{Mode: mode, Rel: pred}
		plan, err := p.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := p.Plan(context.Background(), s)
		if !reflect.DeepEqual(plan, again) {
			t.Fatal("equal inputs gave different plans")
		}
		// Quiet changes the explanations, never the decisions.
		other := *s
		other.Quiet = !s.Quiet
		alt, err := p.Plan(context.Background(), &other)
		if err != nil {
			t.Fatal(err)
		}
		if len(alt.Decisions) != len(plan.Decisions) {
			t.Fatalf("quiet %v: %d decisions, %d the other way", s.Quiet, len(plan.Decisions), len(alt.Decisions))
		}
		for i, d := range plan.Decisions {
			a := alt.Decisions[i]
			if d.Job != a.Job || d.Action != a.Action || !reflect.DeepEqual(d.Chosen, a.Chosen) {
				t.Fatalf("decision %d differs with Quiet flipped: %+v vs %+v", i, d, a)
			}
		}
		used := make([]int, n)
		seen := map[string]bool{}
		jobs := map[string]policy.Job{}
		for _, j := range s.Queue {
			jobs[j.ID] = j
		}
		for _, d := range plan.Decisions {
			if seen[d.Job] {
				t.Fatalf("job %s decided twice", d.Job)
			}
			seen[d.Job] = true
			j := jobs[d.Job]
			switch d.Action {
			case policy.Start:
				for _, pt := range d.Chosen.Parts {
					used[pt.Site] += pt.Nodes
					if s.Sites[pt.Site].Down {
						t.Fatalf("started on a down site")
					}
				}
				if mode != MinMin && !j.Deadline.IsZero() && d.Chosen.End().After(j.Deadline) {
					t.Fatalf("%s start misses the deadline: %v > %v", mode, d.Chosen.End(), j.Deadline)
				}
			case policy.Reject:
				for _, st := range s.Sites {
					if st.Nodes >= j.Width {
						t.Fatalf("rejected %s (width %d) though %s has %d nodes", j.ID, j.Width, st.Name, st.Nodes)
					}
				}
			default:
				t.Fatalf("unexpected action %v", d.Action)
			}
		}
		for i := range used {
			if used[i] > s.Sites[i].Free {
				t.Fatalf("site %d: started %d nodes, %d free", i, used[i], s.Sites[i].Free)
			}
		}
	})
}
