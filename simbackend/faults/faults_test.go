package faults

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/simbackend"
)

func TestPaper004Models(t *testing.T) {
	for level, rate := range map[string]float64{"low": 0.016, "high": 2.177} {
		m, err := Paper004(level)
		if err != nil {
			t.Fatal(err)
		}
		if got := float64(time.Minute) / float64(m.MeanGap()); math.Abs(got-rate)/rate > 1e-6 {
			t.Errorf("%s: %v failures/min, want %v", level, got, rate)
		}
		t.Logf("%s: α %v η %v mean gap %v", level, m.Shape, m.Scale, m.MeanGap())
	}
	if _, err := Paper004("medium"); !errors.Is(err, ErrBadModel) {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	good, _ := Paper004("low")
	for field, edit := range map[string]func(*Model){
		"shape":      func(m *Model) { m.Shape = 0 },
		"scale":      func(m *Model) { m.Scale = -1 },
		"Zipf β":     func(m *Model) { m.Beta = math.NaN() },
		"Pareto θ":   func(m *Model) { m.Theta = 0 },
		"Pareto ω":   func(m *Model) { m.Omega = math.Inf(1) },
		"max repair": func(m *Model) { m.MaxRepair = time.Second },
	} {
		m := good
		edit(&m)
		if err := m.Validate(); !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if _, _, err := good.Schedule(1, 0, time.Hour); !errors.Is(err, ErrBadModel) {
		t.Errorf("0 sites: %v", err)
	}
}

// TestScheduleDistributions checks a long log against the three laws:
// the mean gap (failures + absorbed over the horizon), the Zipf shares of
// the most and least failure-prone sites, and the Pareto median.
func TestScheduleDistributions(t *testing.T) {
	m := Model{Shape: 0.871, Scale: 30 * time.Second, Beta: 0.76, Theta: 127 * time.Second, Omega: 0.87}
	const sites = 10
	horizon := 2000 * time.Hour
	outs, st, err := m.Schedule(42, sites, horizon)
	if err != nil {
		t.Fatal(err)
	}
	n := st.Failures + st.Absorbed
	want := float64(horizon) / float64(m.MeanGap())
	if math.Abs(float64(n)-want)/want > 0.03 {
		t.Errorf("%d failures drawn, want about %.0f", n, want)
	}
	// Absorbed failures depend on downtime; compare the Zipf shares among
	// the failures of sites by rank over all draws via PerSite: rank 1
	// must hit clearly more than rank 10.
	byRank := make([]int, sites)
	for s, r := range st.Rank {
		byRank[r-1] = st.PerSite[s]
	}
	if byRank[0] <= byRank[sites-1] {
		t.Errorf("rank 1 had %d outages, rank 10 %d", byRank[0], byRank[sites-1])
	}
	var reps []float64
	for i, o := range outs {
		if o.Up-o.Down < m.Theta || o.Up-o.Down > DefaultMaxRepair {
			t.Fatalf("repair %v outside [θ, cap]", o.Up-o.Down)
		}
		reps = append(reps, float64(o.Up-o.Down))
		if i > 0 && o.Down < outs[i-1].Down {
			t.Fatal("log not in time order")
		}
	}
	slices.Sort(reps)
	med := time.Duration(reps[len(reps)/2])
	wantMed := time.Duration(float64(m.Theta) * math.Pow(2, 1/m.Omega))
	if math.Abs(float64(med-wantMed))/float64(wantMed) > 0.08 {
		t.Errorf("median repair %v, want about %v", med, wantMed)
	}
	// No two outages of a site overlap.
	last := map[int]time.Duration{}
	for _, o := range outs {
		if o.Down < last[o.Site] {
			t.Fatalf("site %d: outage at %v overlaps the previous one (up at %v)", o.Site, o.Down, last[o.Site])
		}
		last[o.Site] = o.Up
	}
	// Zipf without absorption: with β = 0 and tiny repairs the shares are even.
	even := Model{Shape: 1, Scale: time.Hour, Beta: 0, Theta: time.Millisecond, Omega: 5}
	_, st2, _ := even.Schedule(7, 4, 40000*time.Hour)
	for s, c := range st2.PerSite {
		if share := float64(c) / float64(st2.Failures); math.Abs(share-0.25) > 0.02 {
			t.Errorf("β 0: site %d share %.3f, want 0.25", s, share)
		}
	}
}

func TestScheduleDeterministic(t *testing.T) {
	m, _ := Paper004("high")
	a, sa, _ := m.Schedule(9, 10, 24*time.Hour)
	b, sb, _ := m.Schedule(9, 10, 24*time.Hour)
	c, _, _ := m.Schedule(10, 10, 24*time.Hour)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(sa, sb) {
		t.Fatal("same seed, different logs")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same log")
	}
	if len(a) == 0 {
		t.Fatal("a day at the high rate gave no failure")
	}
}

// TestInjectOnSimulatedSites plays a log on real simulated sites: the
// failed site loses its running and queued jobs, refuses work while down,
// takes work again after the repair; the other site is untouched.
func TestInjectOnSimulatedSites(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := simbackend.NewEngine(epoch, 1)
	var changes []backends.JobStatus
	mk := func(name string) *simbackend.Site {
		s, err := simbackend.NewSite(e, simbackend.SiteConfig{Name: name, Nodes: 1, OnChange: func(st backends.JobStatus) { changes = append(changes, st) }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := mk("A"), mk("B")
	ctx := context.Background()
	sub := func(s *simbackend.Site, id string) backends.JobID {
		j, err := s.Submit(ctx, &backends.JobSpec{GridID: id, Name: id, Command: []string{"x"}, Nodes: 1, Walltime: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	run1, queued1, run2 := sub(a, "a1"), sub(a, "a2"), sub(b, "b1")
	var events []string
	outs := []Outage{{Site: 0, Down: 10 * time.Minute, Up: 20 * time.Minute}}
	if err := Inject(e, []*simbackend.Site{a, b}, epoch, outs, func(site int, down bool, at time.Time) {
		events = append(events, at.Sub(epoch).String()+map[bool]string{true: " down", false: " up"}[down])
	}); err != nil {
		t.Fatal(err)
	}
	e.RunUntil(epoch.Add(15 * time.Minute))
	if _, err := a.Submit(ctx, &backends.JobSpec{GridID: "x", Name: "x", Command: []string{"x"}, Nodes: 1, Walltime: time.Minute}); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("submit to a failed site: %v", err)
	}
	e.RunUntil(epoch.Add(21 * time.Minute))
	got := map[backends.JobID]string{}
	for _, c := range changes {
		if c.State.Final() {
			got[c.ID+"@"+backends.JobID(c.GridID)] = c.State.String() + " " + c.Reason + " " + c.End.Sub(epoch).String()
		}
	}
	want := map[backends.JobID]string{
		run1 + "@a1":    "failed NodeFail 10m0s",
		queued1 + "@a2": "failed SiteFailed 10m0s",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("final states %v, want %v", got, want)
	}
	st, _ := b.Status(ctx, []backends.JobID{run2})
	if st[0].State != backends.StateRunning {
		t.Fatalf("the other site's job: %v", st[0].State)
	}
	if !reflect.DeepEqual(events, []string{"10m0s down", "20m0s up"}) {
		t.Fatalf("events %v", events)
	}
	// Repaired: it takes work and runs it.
	id := sub(a, "a3")
	e.RunUntil(epoch.Add(22 * time.Minute))
	st, _ = a.Status(ctx, []backends.JobID{id})
	if st[0].State != backends.StateRunning {
		t.Fatalf("after repair: %v", st[0].State)
	}
	if down, _ := a.Failed(); down {
		t.Fatal("still failed after repair")
	}
}
