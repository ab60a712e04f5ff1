package simbackend

import (
	"errors"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Withdraw removes a waiting job, leaves a running or ended one alone
// (ErrStarted), and is idempotent.
func TestSiteWithdraw(t *testing.T) {
	e, s := newTestSite(t, 2, EASYOptions{}, nil)
	run := mustSubmit(t, s, spec("run", 2, 100*time.Second, 100*time.Second))
	wait := mustSubmit(t, s, spec("wait", 2, 100*time.Second, 100*time.Second))
	e.RunUntil(at(10))
	if err := s.Withdraw(bg, run); !errors.Is(err, backends.ErrStarted) {
		t.Fatalf("withdrawing a running job: %v, want ErrStarted", err)
	}
	if got := st(t, s, run); got.State != backends.StateRunning {
		t.Fatalf("a withdrawal must never stop a running job: %+v", got)
	}
	for i := 0; i < 2; i++ {
		if err := s.Withdraw(bg, wait); err != nil {
			t.Fatalf("withdrawal %d of a waiting job: %v", i+1, err)
		}
	}
	if got := st(t, s, wait); got.State != backends.StateCancelled || !got.Start.IsZero() {
		t.Fatalf("withdrawn: %+v", got)
	}
	e.RunUntil(at(200))
	if err := s.Withdraw(bg, run); !errors.Is(err, backends.ErrStarted) {
		t.Fatalf("withdrawing an ended job: %v, want ErrStarted", err)
	}
	if err := s.Withdraw(bg, "999"); err != nil {
		t.Fatalf("an id the site never issued is nothing to withdraw: %v", err)
	}
}
