package bridge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// slowSite is a one-site batch system as PBS behaves at binding: a
// cancelled job keeps its nodes for a while (busyFor more Info calls), and
// a reservation asked for while any node is busy is refused with the
// scheduler's words.
type slowSite struct {
	*fakeSite
	busyFor  int // Info calls that still show a cancelled job's nodes busy
	refuse   int // creations still refused even with the nodes free
	created  []string
	attempts int
}

func (f *slowSite) Info(ctx context.Context) (*backends.SiteInfo, error) {
	in, err := f.fakeSite.Info(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busyFor > 0 {
		f.busyFor--
		in.FreeNodes = 0
	}
	return in, err
}

func (f *slowSite) Cancel(ctx context.Context, id backends.JobID) error {
	f.mu.Lock()
	f.busyFor = 2
	f.mu.Unlock()
	return f.fakeSite.Cancel(ctx, id)
}

func (f *slowSite) CreateReservation(_ context.Context, r *backends.ReservationSpec) (backends.ResvID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.busyFor > 0 || f.refuse > 0 {
		f.refuse--
		return "", fmt.Errorf("%w: No available resources on nodes", backends.ErrRejected)
	}
	f.created = append(f.created, r.Name)
	return backends.ResvID("R" + r.Name), nil
}

func (f *slowSite) ShowReservation(_ context.Context, id backends.ResvID) (*backends.Reservation, error) {
	return nil, fmt.Errorf("%w: reservation %s not found", backends.ErrRejected, id)
}

func (f *slowSite) DeleteReservation(context.Context, backends.ResvID) error { return nil }

func (f *slowSite) Capabilities() backends.Capabilities { return backends.Capabilities{Reserve: true} }

// TestBindingWaitsForPreemptedNodes: a binding that must preempt a running
// grid job sends the cancel, then waits until the site shows the nodes
// free before it asks for the native reservation (no refusal for nodes
// the cancelled job still held); a creation refused after that is asked
// again at the next binding with the site's reason, and the reservation is
// made inside its window.
func TestBindingWaitsForPreemptedNodes(t *testing.T) {
	ctx := context.Background()
	site := &slowSite{fakeSite: newFake("A", 1), refuse: 1}
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: site, H: 1}}, Planner: scriptPlanner{firstFit}, BindLead: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	long, err := b.Submit(ctx, Request{Name: "long", Command: []string{"true"}, Nodes: 1, Estimate: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	site.set(long.ID, backends.StateRunning, 0)
	mustCycle(t, b, t0.Add(time.Second))
	r := Request{Name: "r", Command: []string{"true"}, Nodes: 1, Estimate: 3 * time.Minute,
		Window: &Window{Earliest: t0.Add(2 * time.Minute), Latest: t0.Add(6 * time.Minute)}}
	rj, err := b.Submit(ctx, r, t0.Add(time.Minute))
	if err != nil || rj.State != Reserved {
		t.Fatalf("reservation: %+v %v", rj, err)
	}
	now := t0.Add(2 * time.Minute)
	for k := 0; k < 6; k++ {
		if _, err := b.BindReservations(ctx, now); err != nil {
			t.Fatal(err)
		}
		now = now.Add(10 * time.Second)
	}
	got, _ := b.Job(rj.ID)
	var kinds []string
	for _, e := range got.Events {
		kinds = append(kinds, e.Kind+": "+e.Msg)
	}
	if got.Resv.State != ResvBound && got.State != Dispatched {
		t.Fatalf("reservation %s, resv %+v; want bound\n%s", got.State, got.Resv, strings.Join(kinds, "\n"))
	}
	if len(site.created) != 1 || site.attempts != 2 {
		t.Fatalf("created %v in %d attempts; want one, after one refusal (none while the preempted job held the node)\n%s", site.created, site.attempts, strings.Join(kinds, "\n"))
	}
	if !hasEvent(got, "binding-wait", "the reservation is created once the site shows 1 node(s) free") ||
		!hasEvent(got, "binding-retry", "No available resources on nodes") {
		t.Fatalf("events do not tell the wait and the refusal:\n%s", strings.Join(kinds, "\n"))
	}
	l, _ := b.Job(long.ID)
	if !hasEvent(l, "preempted", "") {
		t.Fatalf("the long job was not preempted: %+v", l.Events)
	}
}

// TestBindingRefusedUntilTheWindowCloses: a site that keeps refusing is
// asked at each binding until the window's latest start, and the
// reservation then fails with the site's reason.
func TestBindingRefusedUntilTheWindowCloses(t *testing.T) {
	ctx := context.Background()
	site := &slowSite{fakeSite: newFake("A", 1), refuse: 1 << 20}
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: site, H: 1}}, Planner: scriptPlanner{firstFit}, BindLead: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := Request{Name: "r", Command: []string{"true"}, Nodes: 1, Estimate: 3 * time.Minute,
		Window: &Window{Earliest: t0.Add(time.Minute), Latest: t0.Add(5 * time.Minute)}}
	rj, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	for now := t0.Add(40 * time.Second); now.Before(t0.Add(3 * time.Minute)); now = now.Add(20 * time.Second) {
		if _, err := b.BindReservations(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := b.Job(rj.ID)
	if got.State != Failed || !strings.Contains(got.Reason, "refused it") || !strings.Contains(got.Reason, "No available resources on nodes") {
		t.Fatalf("%s (%q); want failed with the site's reason", got.State, got.Reason)
	}
	if site.attempts < 3 {
		t.Fatalf("asked %d times; want a try at each binding while the window allowed", site.attempts)
	}
}
