package slurm

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// TestRoutinePollsFollowTheBudget: the broker asks for status and capacity
// every cycle (here every second for ten minutes); the site sees a poll
// every PollFast while a change is expected (after a submission, a change,
// an expected end) and every PollSlow otherwise, the capacity every
// CapacityEvery, and never more commands than the budget allows.
func TestRoutinePollsFollowTheBudget(t *testing.T) {
	var mu sync.Mutex
	n := map[string]int{}
	now := time.Unix(1_800_000_000, 0)
	state := "RUNNING"
	run := runnerFunc(func(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		n[cmdName(argv)]++
		switch cmdName(argv) {
		case "squeue":
			if contains(argv, "-j") {
				return backends.Result{Stdout: []byte("7" + Sep + state + Sep + "None" + Sep + "0" + Sep + "1800000000" + Sep + "1800090000" + Sep +
					"1-00:00:00" + Sep + "1" + Sep + "n1" + Sep + "batch" + Sep + "gridsub:g" + Sep + "g\n")}, nil
			}
			return backends.Result{}, nil
		case "sinfo":
			return fixture(t, "sinfo"), nil
		case "sbatch":
			return backends.Result{Stdout: []byte("7\n")}, nil
		}
		return backends.Result{ExitCode: 1, Stderr: []byte("unexpected")}, nil
	})
	b := New(Config{Name: "x", JobCompFile: "-", Now: func() time.Time { return now }}, run, nil)
	ctx := backends.Routine(context.Background())
	cycle := func(secs int) (polls int) {
		for range secs {
			if _, err := b.Info(ctx); err != nil {
				t.Fatalf("Info: %v", err)
			}
			if _, err := b.Status(ctx, []backends.JobID{"7"}); err == nil {
				polls++
			} else if !errors.Is(err, backends.ErrDeferred) {
				t.Fatalf("Status: %v", err)
			}
			now = now.Add(time.Second)
		}
		return polls
	}
	if _, err := b.Submit(context.Background(), &backends.JobSpec{GridID: "g", Nodes: 1, Walltime: time.Hour, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	// Soon after the submission: fast polls.
	if p := cycle(60); p < 5 || p > 7 {
		t.Errorf("first minute after a submission: %d polls, want one every %s", p, sshbatch.DefaultPollFast)
	}
	cycle(int(sshbatch.DefaultSettle / time.Second)) // settle
	mu.Lock()
	clear(n)
	mu.Unlock()
	// Nothing expected to change: slow polls; capacity on its own clock.
	if p, want := cycle(600), int(10*time.Minute/sshbatch.DefaultPollSlow); p < want-2 || p > want+1 {
		t.Errorf("ten quiet minutes: %d polls, want one every %s", p, sshbatch.DefaultPollSlow)
	}
	mu.Lock()
	if n["sinfo"] < 4 || n["sinfo"] > 6 {
		t.Errorf("ten quiet minutes: %d capacity reports, want one every %s", n["sinfo"], sshbatch.DefaultCapacityEvery)
	}
	total := 0
	for _, k := range n {
		total += k
	}
	mu.Unlock()
	if perMin := float64(total) / 10; perMin > sshbatch.DefaultPerMinute {
		t.Errorf("%.1f commands a minute at steady state (%v), budget %d", perMin, n, sshbatch.DefaultPerMinute)
	}
	if st := b.CommandStats(); st.Budget != sshbatch.DefaultPerMinute || st.Total == 0 || st.Deferred == 0 {
		t.Errorf("stats %+v", st)
	}
	// A change seen (the job ended): fast again, and the capacity is asked afresh.
	mu.Lock()
	state = "COMPLETED"
	mu.Unlock()
	cycle(31)
	mu.Lock()
	clear(n)
	mu.Unlock()
	if p := cycle(30); p < 2 {
		t.Errorf("after a change: %d polls in 30s, want fast polls", p)
	}
}

func contains(a []string, w string) bool {
	for _, x := range a {
		if x == w {
			return true
		}
	}
	return false
}

// TestBudgetBucket: routine commands beyond the bucket defer routine calls
// until tokens are earned back, the debt bounded by the burst; commands
// sent on demand are counted but take no tokens.
func TestBudgetBucket(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	b := sshbatch.NewBudget(sshbatch.BudgetConfig{PerMinute: 6, Burst: 6}, func() time.Time { return now }, nil)
	if err := b.Allow(); err != nil {
		t.Fatal(err)
	}
	b.ChargeDemand(100) // a burst of submissions: counted, never held back, no tokens taken
	if err := b.Allow(); err != nil {
		t.Fatalf("polls after a burst of submissions: %v, want allowed", err)
	}
	b.Charge(13)                    // a routine call's commands may run a debt, of at most Burst
	now = now.Add(69 * time.Second) // -6 + 6.9 tokens
	if err := b.Allow(); !errors.Is(err, backends.ErrDeferred) {
		t.Fatalf("at 0.9 tokens: %v, want deferred", err)
	}
	now = now.Add(2 * time.Second)
	if err := b.Allow(); err != nil {
		t.Fatalf("after the debt is paid: %v", err)
	}
	if st := b.Stats(); st.Total != 113 || st.PerMinute != 0 || st.Deferred != 1 {
		t.Errorf("stats %+v: want 113 commands, none in the last minute, 1 deferred", st)
	}
}
