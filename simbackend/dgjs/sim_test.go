package dgjs

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gridsub/gridsub/simbackend/faults"
)

// quiet is a failure model that never fires within any run here: the
// predictor learns nothing (r = 1 everywhere) and only explicit Outages
// happen.
var quiet = faults.Model{Shape: 1, Scale: 1e6 * time.Hour, Beta: 0.76, Theta: time.Minute, Omega: 0.87}

func min_(m int) time.Duration { return time.Duration(m) * time.Minute }

// scenario runs one hand-made case on a fast (h 0.5) and a slow (h 1)
// resource with the invariant checks on.
func scenario(t *testing.T, policy string, jobs []Job, outs []faults.Outage) *Result {
	t.Helper()
	r, err := run(context.Background(), Config{Policy: policy, Failure: quiet, Speeds: []float64{0.5, 1}, JobList: jobs, Outages: outs},
		func(s *sim) error { return s.check() })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRetryAfterFailure(t *testing.T) {
	// Min-min puts the 20-min job on the fast resource (10 min); it fails
	// at 5 min, so the job is re-placed on the slow one: done at 25 min.
	r := scenario(t, PolicyMinMin, []Job{{ID: 0, Base: min_(20), Class: ClassNone}},
		[]faults.Outage{{Site: 0, Down: min_(5), Up: min_(100)}})
	if r.Succeeded != 1 || r.CopiesLost != 1 || r.MeanCompletion != min_(25) || r.Wasted != min_(5) || r.CopiesStarted != 2 {
		t.Fatalf("%+v", *r)
	}
}

func TestPassiveBackupTakesOver(t *testing.T) {
	job := []Job{{ID: 0, Base: min_(20), Class: ClassLoose, Deadline: min_(60)}}
	// Refine: primary on the fast resource [0, 10m); the backup as late as
	// the deadline allows on the slow one, [40m, 60m): passive (40m > 10m).
	ok := scenario(t, PolicyRefine, job, nil)
	if ok.Succeeded != 1 || ok.MeanCompletion != min_(10) || ok.CopiesStarted != 1 || ok.Wasted != 0 {
		t.Fatalf("no failure: the passive backup must never run: %+v", *ok)
	}
	// The primary's resource fails at 5 min: the backup is activated and
	// moved to the earliest gap of its resource, [5m, 25m).
	r := scenario(t, PolicyRefine, job, []faults.Outage{{Site: 0, Down: min_(5), Up: min_(100)}})
	if r.Succeeded != 1 || r.MeanCompletion != min_(25) || r.CopiesLost != 1 || r.CopiesStarted != 2 {
		t.Fatalf("%+v", *r)
	}
}

func TestActiveBackupCancelledWhenPrimaryWins(t *testing.T) {
	// Deadline 24 min: the backup's latest start on the slow resource is
	// 4 min, before the primary's expected end (10 min): active. It runs
	// from 4 min and is cancelled when the primary ends at 10 min.
	r := scenario(t, PolicyRefine, []Job{{ID: 0, Base: min_(20), Class: ClassTight, Deadline: min_(24)}}, nil)
	if r.Succeeded != 1 || r.MeanCompletion != min_(10) || r.CopiesStarted != 2 || r.CopiesCancelled != 1 || r.Wasted != min_(6) {
		t.Fatalf("%+v", *r)
	}
}

func TestReplicationSurvivesAFailure(t *testing.T) {
	// DGJS: deadline 24 min ≤ (1+1.5)·10 min: tier high, two copies at
	// once. The fast one dies at 5 min; the slow one ends at 20 min.
	job := []Job{{ID: 0, Base: min_(20), Class: ClassTight, Deadline: min_(24)}}
	r := scenario(t, PolicyDGJS, job, []faults.Outage{{Site: 0, Down: min_(5), Up: min_(100)}})
	if r.Tiers != [3]int{1, 0, 0} || r.Succeeded != 1 || r.MeanCompletion != min_(20) || r.CopiesLost != 1 || r.CopiesStarted != 2 {
		t.Fatalf("%+v", *r)
	}
	// Without the failure the fast copy wins at 10 min and the slow one is
	// cancelled at once, its 10 minutes wasted.
	r = scenario(t, PolicyDGJS, job, nil)
	if r.Succeeded != 1 || r.MeanCompletion != min_(10) || r.CopiesCancelled != 1 || r.Wasted != min_(10) {
		t.Fatalf("%+v", *r)
	}
}

func TestDeadlineNobodyCanMeet(t *testing.T) {
	// 20-min job, deadline 8 min: no resource can finish it (10 min at
	// best). DGJS gives it up at once; Min-min runs it and abandons it at
	// the deadline, 8 minutes wasted.
	job := []Job{{ID: 0, Base: min_(20), Class: ClassTight, Deadline: min_(8)}}
	if r := scenario(t, PolicyDGJS, job, nil); r.Succeeded != 0 || r.CopiesStarted != 0 {
		t.Fatalf("dgjs: %+v", *r)
	}
	if r := scenario(t, PolicyMinMin, job, nil); r.Succeeded != 0 || r.CopiesCancelled != 1 || r.Wasted != min_(8) {
		t.Fatalf("min-min: %+v", *r)
	}
}

func TestWaitsWhileEveryResourceIsDown(t *testing.T) {
	// Both resources down from 1 to 30 min; a job arriving at 2 min waits
	// and runs on the fast one after its repair at 30 min (10 min).
	r := scenario(t, PolicyDGJS, []Job{{ID: 0, Arrival: min_(2), Base: min_(20), Class: ClassNone}},
		[]faults.Outage{{Site: 0, Down: min_(1), Up: min_(30)}, {Site: 1, Down: min_(1), Up: min_(40)}})
	if r.Succeeded != 1 || r.MeanCompletion != min_(38) {
		t.Fatalf("%+v", *r)
	}
}

func TestRunIsDeterministic(t *testing.T) {
	m, _ := faults.Paper004("high")
	for _, p := range Policies() {
		a, err := Run(context.Background(), Config{Policy: p, Failure: m, Jobs: 150, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Run(context.Background(), Config{Policy: p, Failure: m, Jobs: 150, Seed: 3})
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: same config, different results", p)
		}
	}
	c1 := Config{Policy: PolicyDGJS, Jobs: 50, Seed: 4}
	c2 := Config{Policy: PolicyMinMin, Jobs: 50, Seed: 4}
	c1.defaults()
	c2.defaults()
	if !reflect.DeepEqual(c1.Workload(), c2.Workload()) {
		t.Fatal("the policies must see the same jobs")
	}
}

func TestConfigErrors(t *testing.T) {
	m, _ := faults.Paper004("low")
	for name, c := range map[string]Config{
		"policy":  {Policy: "fifo", Failure: m, Jobs: 1},
		"jobs":    {Policy: PolicyDGJS, Failure: m},
		"speeds":  {Policy: PolicyDGJS, Failure: m, Jobs: 1, Speeds: []float64{1}},
		"speeds[": {Policy: PolicyDGJS, Failure: m, Jobs: 1, Speeds: []float64{1, -1}},
		"failure": {Policy: PolicyDGJS, Jobs: 1},
		"outages": {Policy: PolicyDGJS, Failure: m, Jobs: 1, Outages: []faults.Outage{{Site: 99}}},
	} {
		_, err := Run(context.Background(), c)
		if !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPropertyInvariants runs random small grids under every scheduler
// with the invariants checked after every event: slots never overlap, a
// down resource holds nothing, no resource runs two copies, a passive
// backup never runs, a resolved job (succeeded: its replicas and backups
// cancelled; or given up) has no copy left; and every job is resolved.
func TestPropertyInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(t, "resources")
		sp := make([]float64, n)
		for i := range sp {
			sp[i] = rapid.Float64Range(0.3, 2).Draw(t, "h")
		}
		rate := rapid.Float64Range(0.005, 3).Draw(t, "rate")
		m := faults.Model{Shape: rapid.Float64Range(0.5, 2).Draw(t, "shape"), Beta: rapid.Float64Range(0, 2).Draw(t, "beta"),
			Theta: time.Duration(rapid.IntRange(10, 600).Draw(t, "theta")) * time.Second, Omega: rapid.Float64Range(0.5, 3).Draw(t, "omega"),
			MaxRepair: 6 * time.Hour}
		m.Scale = faults.RateScale(m.Shape, rate)
		cfg := Config{Policy: rapid.SampledFrom(Policies()).Draw(t, "policy"), Failure: m, Speeds: sp,
			Jobs: rapid.IntRange(1, 40).Draw(t, "jobs"), Seed: rapid.Uint64().Draw(t, "seed"),
			ArrivalPerMin: rapid.Float64Range(0.1, 5).Draw(t, "arrival"), MaxAttempts: rapid.IntRange(1, 6).Draw(t, "attempts"),
			History: time.Duration(rapid.IntRange(0, 24).Draw(t, "history")) * time.Hour}
		var s0 *sim
		r, err := run(context.Background(), cfg, func(s *sim) error { s0 = s; return s.check() })
		if err != nil {
			t.Fatal(err)
		}
		if r.Succeeded > r.Jobs || r.ClassJobs[0]+r.ClassJobs[1]+r.ClassJobs[2] != r.Jobs {
			t.Fatalf("counts: %+v", *r)
		}
		if s0 != nil {
			for _, j := range s0.jobs {
				if !j.done {
					t.Fatalf("job %d unresolved", j.ID)
				}
			}
		}
		if r.CopiesLost+r.CopiesCancelled > r.CopiesStarted {
			t.Fatalf("more copies ended badly than started: %+v", *r)
		}
	})
}

func TestActiveBackupMovesUpWhenPrimaryLost(t *testing.T) {
	// Deadline 24 min: active backup on the slow resource at [4m, 24m).
	// The primary's resource fails at 1 min, before the backup started:
	// the backup moves up to [1m, 21m).
	r := scenario(t, PolicyRefine, []Job{{ID: 0, Base: min_(20), Class: ClassTight, Deadline: min_(24)}},
		[]faults.Outage{{Site: 0, Down: min_(1), Up: min_(100)}})
	if r.Succeeded != 1 || r.MeanCompletion != min_(21) || r.CopiesLost != 1 {
		t.Fatalf("%+v", *r)
	}
}
