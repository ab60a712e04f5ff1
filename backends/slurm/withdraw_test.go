package slurm

import (
	"errors"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// A withdrawal holds the job first, and cancels it only once it is seen
// pending while held.
func TestWithdrawHoldsFirst(t *testing.T) {
	if got := HoldArgv("42"); len(got) != 3 || got[0] != "scontrol" || got[1] != "uhold" || got[2] != "42" {
		t.Fatalf("hold argv %q", got)
	}
	if got := ReleaseArgv("42"); len(got) != 3 || got[0] != "scontrol" || got[1] != "release" || got[2] != "42" {
		t.Fatalf("release argv %q", got)
	}
	if got := WithdrawArgv("42"); len(got) != 2 || got[0] != "scancel" || got[1] != "42" {
		t.Fatalf("cancel argv %q", got)
	}
	for msg, want := range map[string]bool{
		"scontrol: error: Job is no longer pending execution for job 42": true,
		"slurm_update error: Invalid job id specified":                   true,
		"scontrol: error: Access/permission denied":                      false,
	} {
		if notPending(msg) != want {
			t.Errorf("notPending(%q) = %v, want %v", msg, !want, want)
		}
	}
}

// withdrawn reads what became of a job after its withdrawal.
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
