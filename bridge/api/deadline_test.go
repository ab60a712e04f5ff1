package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/policy"
)

// Deadlines through the daemon's API and its store: a deadline no site can
// meet is refused as infeasible, 422 with the reason (strict), accepted with a
// deadline-missed event (best-effort); the benefit function and the policy
// are stored with the job and come back.
func TestDeadlineThroughAPI(t *testing.T) {
	ctx := context.Background()
	c, _ := serveUnix(t, realBroker(t))
	r := req("late", 1)
	r.Estimate = 2 * time.Hour
	r.Deadline = t0.Add(time.Hour) // the server's clock is t0
	_, err := c.Submit(ctx, r)
	var ae *api.Error
	if !errors.Is(err, bridge.ErrInfeasible) || errors.Is(err, bridge.ErrBadRequest) || !errors.As(err, &ae) || ae.Status != 422 ||
		!strings.Contains(err.Error(), "cannot meet its deadline") || !strings.Contains(err.Error(), "late") {
		t.Fatalf("strict: %v; want 422 infeasible, as every infeasible job", err)
	}
	r.DeadlinePolicy = bridge.DeadlineBestEffort
	r.Worth = &policy.Worth{Shape: policy.Step, A: 10, B: 0.5, C: 10}
	j, err := c.Submit(ctx, r)
	if err != nil {
		t.Fatalf("best-effort: %v", err)
	}
	got, err := c.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.DeadlineMissed || got.Req.DeadlinePolicy != bridge.DeadlineBestEffort || got.Req.Worth == nil || *got.Req.Worth != *r.Worth {
		t.Fatalf("stored job: missed %v policy %q worth %v", got.DeadlineMissed, got.Req.DeadlinePolicy, got.Req.Worth)
	}
	found := false
	for _, e := range got.Events {
		found = found || e.Kind == bridge.EventDeadlineMissed
	}
	if !found {
		t.Fatalf("no deadline-missed event: %+v", got.Events)
	}
}
