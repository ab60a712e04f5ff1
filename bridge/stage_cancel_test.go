package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// hungCancel is a site whose Cancel does not return until released (or
// its deadline passes).
type hungCancel struct {
	*fakeSite
	entered, release chan struct{}
}

func (h *hungCancel) Cancel(ctx context.Context, id backends.JobID) error {
	close(h.entered)
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.fakeSite.Cancel(ctx, id)
}

// TestCancelsOfOneSiteDoNotWaitForAnother: the cancel stage sends each
// site's cancels on their own, so a site whose cancel hangs does not hold
// up another site's: cancelling a job co-allocated over A and B reaches B
// while A's cancel hangs.
func TestCancelsOfOneSiteDoNotWaitForAnother(t *testing.T) {
	a := &hungCancel{fakeSite: newFake("A", 1), entered: make(chan struct{}), release: make(chan struct{})}
	bsite := newFake("B", 1)
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a, H: 1}, {Name: "B", Backend: bsite, H: 1}}, Planner: scriptPlanner{firstFit}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	j, _ := b.Submit(ctx, req(2), t0) // co-allocated: A:1+B:1
	mustCycle(t, b, t0)
	if got, _ := b.Job(j.ID); got.State != Dispatched || got.Sites() != "A:1+B:1" {
		t.Fatalf("%s on %s, want dispatched on A:1+B:1", got.State, got.Sites())
	}
	done := make(chan error, 1)
	go func() { done <- b.Cancel(ctx, j.ID, t0.Add(time.Second)) }()
	select {
	case <-a.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("A's cancel was never sent")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		bsite.mu.Lock()
		n := len(bsite.cancels)
		bsite.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's cancel waited for A's hung one")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(a.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
