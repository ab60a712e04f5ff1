package slurm

import (
	"errors"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

func TestWithdrawArgvOnlyPending(t *testing.T) {
	got := WithdrawArgv("42")
	if len(got) != 3 || got[0] != "scancel" || got[1] != "--state=PENDING" || got[2] != "42" {
		t.Fatalf("argv %q: scancel must be restricted to pending jobs", got)
	}
}

// withdrawn reads what became of a job after scancel --state=PENDING.
func TestWithdrawnOutcome(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		st   backends.JobStatus
		want error // nil, ErrStarted or ErrUnavailable
	}{
		{"cancelled while pending", backends.JobStatus{ID: "1", State: backends.StateCancelled, Start: t0, End: t0}, nil},
		{"cancelled, no times", backends.JobStatus{ID: "1", State: backends.StateCancelled}, nil},
		{"no record", backends.JobStatus{ID: "1", State: backends.StateLost}, nil},
		{"running", backends.JobStatus{ID: "1", State: backends.StateRunning}, backends.ErrStarted},
		{"completed", backends.JobStatus{ID: "1", State: backends.StateCompleted}, backends.ErrStarted},
		{"cancelled after it ran", backends.JobStatus{ID: "1", State: backends.StateCancelled, Start: t0, End: t0.Add(time.Minute)}, backends.ErrStarted},
		{"still pending", backends.JobStatus{ID: "1", State: backends.StatePending}, backends.ErrUnavailable},
	} {
		err := withdrawn("siteA", tc.st)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}
