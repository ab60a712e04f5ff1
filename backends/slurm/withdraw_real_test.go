package slurm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// On the real testbed: a running job is never stopped by a withdrawal (the
// hold fails, nothing is cancelled, ErrStarted); a job waiting behind it is
// withdrawn without having run; withdrawing it again is no error.
func TestRealSlurmWithdraw(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	b := newBackend(t, s, c, c)
	ctx := context.Background()
	in, err := b.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.Submit(ctx, &backends.JobSpec{GridID: gridID("wd-run"), Nodes: in.Nodes, CoresPerNode: max(in.CoresPerNode, 1),
		Walltime: time.Minute, Command: []string{"sleep", "20"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(context.Background(), run) })
	wait, err := b.Submit(ctx, &backends.JobSpec{GridID: gridID("wd-wait"), Nodes: in.Nodes, CoresPerNode: max(in.CoresPerNode, 1),
		Walltime: time.Minute, Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(context.Background(), wait) })
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		st, err := b.Status(ctx, []backends.JobID{run, wait})
		if err != nil {
			t.Fatal(err)
		}
		if st[0].State == backends.StateRunning && st[1].State == backends.StatePending {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("want one running and one pending job at %s, got %+v", s.name, st)
		}
	}
	if err := b.Withdraw(ctx, run); !errors.Is(err, backends.ErrStarted) {
		t.Fatalf("withdrawing a running job: %v, want ErrStarted", err)
	}
	if err := b.Withdraw(ctx, wait); err != nil {
		t.Fatalf("withdrawing a waiting job: %v", err)
	}
	if err := b.Withdraw(ctx, wait); err != nil {
		t.Fatalf("withdrawing it again: %v", err)
	}
	st, err := b.Status(ctx, []backends.JobID{run, wait})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].State != backends.StateRunning || strings.Contains(st[0].Reason, "Held") {
		t.Fatalf("the running job is %s (%s) after a withdrawal was refused, want still running, its hold released", st[0].State, st[0].Reason)
	}
	if st[1].State != backends.StateCancelled {
		t.Fatalf("the withdrawn job is %s, want cancelled", st[1].State)
	}
}
