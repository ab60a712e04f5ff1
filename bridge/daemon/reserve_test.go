package daemon_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/policy/trust"
)

// A job with a window is admitted at once, bound by the reservation_binding
// task when its window opens, runs inside its native reservation, and the
// reservation is released; GET /v1/reservations shows each stage.
func TestDaemonBindsReservations(t *testing.T) {
	state, sock := dirs(t)
	d := startWith(t, state, sock, 600, map[string]string{daemon.TaskBind: "@every 50ms"})
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	now := d.Now()
	r := request("resv", 40, time.Minute, 5*time.Minute)
	r.Window = &bridge.Window{Earliest: now.Add(3 * time.Minute), Latest: now.Add(20 * time.Minute)}
	j, err := c.Submit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != bridge.Reserved || j.Resv == nil || j.Resv.State != bridge.ResvAdmitted {
		t.Fatalf("answer to the submission: %s %+v; want reserved/admitted at once", j.State, j.Resv)
	}
	active, err := c.Reservations(ctx, true)
	if err != nil || len(active) != 1 || active[0].Job != j.ID || active[0].State != "admitted" || active[0].Nodes != 40 || active[0].Site != "" {
		t.Fatalf("active reservations %+v, %v", active, err)
	}
	// 70 nodes fit only Beijing (128), whose 40 are held over the same window
	// by the first one: still admitted (128 >= 110). A third 70 is not.
	r2 := request("resv2", 70, time.Minute, 5*time.Minute)
	r2.Window = r.Window
	if j2, err := c.Submit(ctx, r2); err != nil || j2.State != bridge.Reserved {
		t.Fatalf("second: %+v %v; want reserved", j2, err)
	}
	if j3, err := c.Submit(ctx, r2); err != nil || j3.State != bridge.Rejected || j3.Reason == "" {
		t.Fatalf("third: %+v %v; want rejected with the admission test's reason", j3, err)
	}

	done := waitState(t, c, j.ID, 30*time.Second, bridge.Completed, bridge.Failed)
	if done.State != bridge.Completed || done.Resv.State != bridge.ResvReleased || done.Resv.Site == "" || done.Resv.Native == "" {
		t.Fatalf("job %s (%s), reservation %+v; want completed in a released reservation", done.State, done.Reason, done.Resv)
	}
	if done.Start.Before(r.Window.Earliest) || done.End.After(r.Window.Latest) {
		t.Fatalf("ran %s..%s, outside its window %s..%s", done.Start, done.End, r.Window.Earliest, r.Window.Latest)
	}
	// The reservations' list is read from the store, which the cycle's
	// grouped write reaches just after the job's end is in memory (what
	// the job's own answer above shows): the row turns released within a
	// cycle or two.
	for until := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		all, err := c.Reservations(ctx, false)
		if err != nil || len(all) != 3 {
			t.Fatalf("all reservations %+v, %v; want 3 rows", all, err)
		}
		if all[0].Job == j.ID && all[0].State == "released" && all[0].Site == done.Resv.Site && all[0].Start != nil {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("stored row of %s after 5s: %+v", j.ID, all[0])
		}
	}
}

// nodeFailure records in the daemon's store a job that failed through
// site's fault (a node failure: bridge.Job.SiteFault), which the simulated
// sites do not make; the store counts it against site as the broker's
// would.
func nodeFailure(t *testing.T, state, site, id string) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(state, daemon.DBName), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(context.Background(), &bridge.Job{ID: id, State: bridge.Failed, SiteFault: true, ExitCode: -1,
		Reason: "node failure", Comps: []bridge.Component{{Site: site, Nodes: 1}}}); err != nil {
		t.Fatal(err)
	}
}

// The trust task scores every site from what the store counted, writes the
// scores (GET /v1/sites), and a site where a job failed through the site's
// fault scores lower than it would have without the failure; a job whose
// own command failed (exit 3 at Shanghai) does not count.
func TestDaemonRecomputesTrust(t *testing.T) {
	state, sock := dirs(t)
	// Outcomes that never age, so the scores are exactly the model's.
	startOpts(t, daemon.Options{StateDir: state, Socket: sock, TimeScale: 600, TrustHalfLife: -1,
		Cron: map[string]string{daemon.TaskTrust: "@every 100ms"}})
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	for _, r := range okAndFailing() {
		j, err := c.Submit(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, c, j.ID, 15*time.Second, bridge.Completed, bridge.Failed)
	}
	nodeFailure(t, state, "Shanghai", "nodefail-1")
	// What the model says for the counts the store holds now.
	model := trust.DefaultModel()
	expect := func(failedAtShanghai int) map[string]float64 {
		var nodes []trust.Node
		out := map[trust.Key]trust.Outcomes{}
		for _, s := range testbed().Sites {
			nodes = append(nodes, trust.Node{Name: s.Name, Power: float64(s.Nodes) / s.H})
			o := trust.Outcomes{}
			switch s.Name {
			case "Harbin":
				o.Completed = 1
			case "Shanghai":
				o.Failed = float64(failedAtShanghai)
			}
			out[trust.Key{From: "", To: s.Name}] = o
		}
		return model.Scores(trust.Node{}, nodes, out)
	}
	want, clean := expect(1), expect(0)
	if !(want["Shanghai"] < clean["Shanghai"]) {
		t.Fatalf("the model does not lower Shanghai's trust for a failure: %v vs %v", want, clean)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := c.SiteStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		match := len(r.Details) == 3
		for _, s := range r.Details {
			match = match && s.Trust != nil && math.Abs(*s.Trust-want[s.Name]) < 1e-12 && s.TrustComputedAt != nil
		}
		if match {
			for _, s := range r.Details {
				t.Logf("%s: trust %.4f (done %d, failed %d)", s.Name, *s.Trust, s.JobsCompleted, s.JobsFailed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trust served %+v; want %v", r.Details, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The policy weighs by it: Shanghai and Harbin are alike (h 1, free),
	// and the tie would go to Shanghai, the lower index; at trust 0.61 its
	// predicted end counts for 1/0.61 of it, so the job runs at Harbin. The
	// task hands the scores to the broker right after storing them, and
	// again every 100 ms.
	time.Sleep(250 * time.Millisecond)
	r := request("choice", 2, 30*time.Second, 5*time.Minute)
	r.Sites = []string{"Shanghai", "Harbin"}
	j, err := c.Submit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	j = waitState(t, c, j.ID, 15*time.Second, bridge.Completed, bridge.Failed)
	if j.State != bridge.Completed || !strings.HasPrefix(j.Sites(), "Harbin") {
		t.Fatalf("job %s ended %s at %q; want completed at Harbin, the trusted of two equal sites", j.ID, j.State, j.Sites())
	}
}

// Outcomes age: with a half-life of 300 ms, Shanghai's score falls to the
// full weight of its failure (a node failure) when the trust task first counts it, and
// climbs back towards 1 as the failure ages.
func TestDaemonTrustDecays(t *testing.T) {
	state, sock := dirs(t)
	startOpts(t, daemon.Options{StateDir: state, Socket: sock, TimeScale: 600, TrustHalfLife: 300 * time.Millisecond,
		Cron: map[string]string{daemon.TaskTrust: "@every 50ms"}})
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	nodeFailure(t, state, "Shanghai", "nodefail-1")
	lowest, deadline := 1.0, time.Now().Add(15*time.Second)
	for {
		r, err := c.SiteStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Details {
			if s.Name == "Shanghai" && s.Trust != nil {
				lowest = min(lowest, *s.Trust)
				if lowest < 0.65 && *s.Trust > 0.95 {
					t.Logf("Shanghai: trust %.3f at its lowest, %.3f now", lowest, *s.Trust)
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Shanghai's trust was %.3f at its lowest and never climbed back above 0.95 (want a fall below 0.65 first)", lowest)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
