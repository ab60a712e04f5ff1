package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// laggingSite is a batch site as a real one reports itself: a job it has
// accepted but not started holds no node in its Info (sinfo shows the
// nodes idle until the job starts), and it starts nothing by itself.
type laggingSite struct{ *fakeSite }

func (f laggingSite) Info(context.Context) (*backends.SiteInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := &backends.SiteInfo{Name: f.name, Nodes: f.nodes, FreeNodes: f.nodes}
	for id, st := range f.jobs {
		if st.State == backends.StateRunning {
			in.FreeNodes -= f.specs[id].Nodes
			in.Busy = append(in.Busy, backends.Allocation{Nodes: f.specs[id].Nodes, Until: t0.Add(time.Hour)})
		}
	}
	return in, nil
}

// count is the nodes of the jobs a site holds in state s.
func (f *fakeSite) count(s backends.State) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, st := range f.jobs {
		if st.State == s {
			n += f.specs[st.ID].Nodes
		}
	}
	return n
}

// TestBurstSeesItsOwnPendingJobs: a burst of 20 one-node jobs arriving over
// four cycles onto two idle sites (8 and 4 nodes) whose reports lag — a
// job accepted but not started shows no busy node — fills the free nodes
// of both sites and sends no site more than it has free: the jobs
// dispatched in earlier cycles and still pending there count against its
// free nodes until the site reports them running. Without that count the
// second cycle sees siteA idle again and piles the burst up there.
func TestBurstSeesItsOwnPendingJobs(t *testing.T) {
	a, b := laggingSite{newFake("siteA", 8)}, laggingSite{newFake("siteB", 4)}
	br, err := New(Options{Sites: []SiteConfig{{Name: "siteA", Backend: a, H: 1}, {Name: "siteB", Backend: b, H: 1}},
		Planner: scriptPlanner{firstFit}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := t0
	for c := 0; c < 4; c++ {
		for i := 0; i < 5; i++ {
			if _, err := br.Submit(ctx, req(1), now); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(time.Second)
		mustCycle(t, br, now)
		if pa, pb := a.count(backends.StatePending), b.count(backends.StatePending); pa > 8 || pb > 4 {
			t.Fatalf("cycle %d: %d jobs pending at siteA (8 nodes), %d at siteB (4 nodes): the burst overcommitted a site", c, pa, pb)
		}
	}
	if pa, pb := a.count(backends.StatePending), b.count(backends.StatePending); pa != 8 || pb != 4 {
		t.Fatalf("after the burst: %d jobs at siteA, %d at siteB; want both sites' free nodes filled (8 and 4)", pa, pb)
	}
	// siteA starts its jobs: its report now includes them, and the nodes
	// they hold are not counted twice.
	a.mu.Lock()
	for _, st := range a.jobs {
		st.State = backends.StateRunning
	}
	a.mu.Unlock()
	mustCycle(t, br, now.Add(time.Second))
	br.mu.Lock()
	free := br.snapSites[0].Free
	br.mu.Unlock()
	if free != 0 {
		t.Fatalf("siteA runs 8 jobs on its 8 nodes; the snapshot says %d free", free)
	}
	// The 8 jobs still in gridsub's queue go out as siteA's jobs end.
	a.mu.Lock()
	k := 0
	for _, st := range a.jobs {
		if k < 3 {
			st.State, st.ExitCode = backends.StateCompleted, 0
		}
		k++
	}
	a.mu.Unlock()
	mustCycle(t, br, now.Add(2*time.Second))
	if pa := a.count(backends.StatePending); pa != 3 {
		t.Fatalf("3 nodes freed at siteA: %d jobs pending there, want 3", pa)
	}
}
