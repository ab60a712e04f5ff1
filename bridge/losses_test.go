package bridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

func TestIsSiteLoss(t *testing.T) {
	for _, c := range []struct {
		st   backends.JobStatus
		want bool
	}{
		{backends.JobStatus{State: backends.StateLost}, true},
		{backends.JobStatus{State: backends.StateFailed, Reason: "NodeFail"}, true},
		{backends.JobStatus{State: backends.StateFailed, Reason: "SiteFailed"}, true},
		{backends.JobStatus{State: backends.StateFailed, Reason: "NODE_FAIL"}, true},
		{backends.JobStatus{State: backends.StateFailed, Reason: "BOOT_FAIL"}, true},
		{backends.JobStatus{State: backends.StateFailed, Reason: "NodeDown"}, true},
		{backends.JobStatus{State: backends.StateFailed, Reason: "NonZeroExitCode"}, false},
		{backends.JobStatus{State: backends.StateFailed}, false},
		{backends.JobStatus{State: backends.StateTimeout, Reason: "NodeFail"}, false},
		{backends.JobStatus{State: backends.StateCancelled}, false},
		{backends.JobStatus{State: backends.StateCompleted}, false},
		{backends.JobStatus{State: backends.StateRunning, Reason: "NodeFail"}, false},
	} {
		if got := IsSiteLoss(c.st); got != c.want {
			t.Errorf("IsSiteLoss(%v, %q) = %v, want %v", c.st.State, c.st.Reason, got, c.want)
		}
	}
}

// failTag ends the job tagged tag at this site failed with reason.
func (f *fakeSite) failTag(tag, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.jobs {
		if st.GridID == tag && !st.State.Final() {
			st.State, st.ExitCode, st.Reason = backends.StateFailed, -1, reason
		}
	}
}

// TestLossesReachReliability: jobs a site loses to a node failure are one
// failure observation per site and cycle; a job failing by itself is none;
// a site that does not answer is reported down, not lost.
func TestLossesReachReliability(t *testing.T) {
	a := &flaky{fakeSite: newFake("A", 4)}
	rel := &fakeRel{rc: map[string]float64{"A": 0, "B": 1}}
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: a}, {Name: "B", Backend: newFake("B", 4)}},
		Planner: scriptPlanner{fitAllowed}, Tiers: &TierOptions{DownAfter: 10 * time.Second, Reliability: rel}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 4 {
		j, err := b.Submit(context.Background(), qreq("none"), t0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	mustCycle(t, b, t0)
	for _, id := range ids {
		if j, _ := b.Job(id); j.Sites() != "A:1" {
			t.Fatalf("job %s at %s, want A", id, j.Sites())
		}
	}
	tag := func(i int) string { return RemoteTag(ids[i], 1) }
	a.failTag(tag(0), "NodeFail")
	a.failTag(tag(1), "NODE_FAIL")
	a.failTag(tag(2), "NonZeroExitCode") // the program's failure: no loss
	mustCycle(t, b, t0.Add(time.Second))
	a.failTag(tag(3), "SiteFailed")
	mustCycle(t, b, t0.Add(2*time.Second))
	a.down.Store(true)
	mustCycle(t, b, t0.Add(3*time.Second)) // nothing live at A any more: no poll, no report
	want := "A lost 1s;A lost 2s"
	if got := strings.Join(rel.obs, ";"); got != want {
		t.Fatalf("observed %q, want %q", got, want)
	}
	// The lost jobs were retried elsewhere (tier none), not dropped.
	for _, i := range []int{0, 1, 3} {
		if j, _ := b.Job(ids[i]); j.State == Failed {
			t.Errorf("lost job %s failed: %s", j.ID, kinds(j))
		}
	}
}
