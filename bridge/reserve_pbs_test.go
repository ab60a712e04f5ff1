package bridge

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/pbs/pbslock"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/policy/coalloc"
)

// realPBS is the OpenPBS testbed's one-node server as a site (skipped
// without its environment).
func realPBS(t *testing.T) *pbs.Backend {
	t.Helper()
	key := os.Getenv("GRIDSUB_PBS_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_PBS_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no OpenPBS testbed: run `bash scripts/pbs-testbed.sh start && source /var/tmp/gridsub-pbs/testbed.env`")
	}
	pbslock.Hold(t)
	ssh := transport.Config{Host: os.Getenv("GRIDSUB_PBS_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_PBS_SSH_USER"),
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_PBS_SSH_KNOWN_HOSTS")}, MaxSessions: 8}
	b, err := pbs.Connect(context.Background(), pbs.Config{Name: "pbs", RemoteDir: os.Getenv("GRIDSUB_PBS_HOME_DIR") + "/gridsub-resv-test",
		User: ssh.User, BinDir: os.Getenv("GRIDSUB_PBS_BIN"), Location: time.UTC}, ssh)
	if err != nil {
		t.Fatalf("connecting to the PBS testbed: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// pbsBroker is a live broker over the PBS site, binding 30 s ahead.
func pbsBroker(t *testing.T, site *pbs.Backend) *Broker {
	t.Helper()
	pl, err := coalloc.ByName("greedy-easy")
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Sites: []SiteConfig{{Name: "pbs", Backend: site, H: 1}}, Planner: pl, Store: NewMemStore(), BindLead: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// driveUntil binds and cycles on the wall clock every second until cond
// holds or d passes; it reports whether cond held.
func driveUntil(t *testing.T, b *Broker, d time.Duration, cond func() bool) bool {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		if _, err := b.BindReservations(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Cycle(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if cond() {
			return true
		}
	}
	return false
}

func cancelAll(b *Broker, ids ...string) {
	for _, id := range ids {
		_ = b.Cancel(context.Background(), id, time.Now())
	}
	for range 3 {
		_, _ = b.Cycle(context.Background(), time.Now())
		time.Sleep(500 * time.Millisecond)
	}
}

func eventText(j *Job) string {
	var b strings.Builder
	for _, e := range j.Events {
		b.WriteString(e.Time.Format("15:04:05") + " " + e.Kind + " " + e.Site + " " + e.Msg + "\n")
	}
	return b.String()
}

// TestRealPBSReservationHarmsNothing is the PBS scenario of issue #23 on
// the real OpenPBS server (one node): a 3-minute job submitted while an
// advance reservation is admitted for a window that opens in 35 s is not
// started on the only node (it would still run then), so nothing is
// killed at binding; pbs_rsub confirms the reservation, the reserved job
// runs inside it, and the other job runs once it is over, in one attempt.
func TestRealPBSReservationHarmsNothing(t *testing.T) {
	site := realPBS(t)
	b := pbsBroker(t, site)
	ctx := context.Background()
	now := time.Now()
	r, err := b.Submit(ctx, Request{Name: "resv", Command: []string{"/bin/sleep", "3"}, Nodes: 1, Estimate: 40 * time.Second,
		Window: &Window{Earliest: now.Add(35 * time.Second), Latest: now.Add(35*time.Second + 100*time.Second)}}, now)
	if err != nil || r.State != Reserved {
		t.Fatalf("reservation: %+v %v", r, err)
	}
	j, err := b.Submit(ctx, Request{Name: "three-minutes", Command: []string{"/bin/sleep", "3"}, Nodes: 1, Estimate: 3 * time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancelAll(b, r.ID, j.ID) })
	done := driveUntil(t, b, 4*time.Minute, func() bool {
		gr, _ := b.Job(r.ID)
		gj, _ := b.Job(j.ID)
		return gr.State.Final() && gj.State.Final()
	})
	gr, _ := b.Job(r.ID)
	gj, _ := b.Job(j.ID)
	t.Logf("reservation job:\n%s", eventText(gr))
	t.Logf("other job:\n%s", eventText(gj))
	if !done {
		t.Fatalf("not both ended within 4 minutes: reservation %s, other %s", gr.State, gj.State)
	}
	if gr.State != Completed || gr.Resv == nil || !strings.HasPrefix(string(gr.Resv.Native), "R") || len(gr.Resv.Preempted) != 0 || gr.Start.Before(gr.Resv.Earliest) {
		t.Fatalf("reservation: %s (%s), resv %+v, start %s; want completed inside a native R<n> reservation, nothing preempted", gr.State, gr.Reason, gr.Resv, gr.Start)
	}
	if gj.State != Completed || gj.Attempts != 1 || strings.Contains(eventText(gj), "preempted") {
		t.Fatalf("other job: %s, %d attempt(s); want completed in one attempt, never preempted", gj.State, gj.Attempts)
	}
	if !strings.Contains(eventText(gj), "not started at pbs") || gj.Start.Before(gr.End) {
		t.Fatalf("other job started %s, reservation job ended %s: it must wait for the window, saying so", gj.Start, gr.End)
	}
}

// TestRealPBSBindingWaitsForPreemptedNode: a job already running on the
// only node when an advance reservation is admitted, for a window with no
// room to delay into, is preempted at binding; the native reservation is
// asked for only once PBS shows the node free again (qdel returns before
// the job has left the node, and pbs_rsub then answers "No available
// resources on nodes"), so it is confirmed and used.
func TestRealPBSBindingWaitsForPreemptedNode(t *testing.T) {
	if os.Getenv("GRIDSUB_LONG") == "" {
		t.Skip("about 2 minutes on the shared OpenPBS server: GRIDSUB_LONG=1 runs it")
	}
	site := realPBS(t)
	b := pbsBroker(t, site)
	ctx := context.Background()
	now := time.Now()
	j, err := b.Submit(ctx, Request{Name: "long", Command: []string{"/bin/sleep", "600"}, Nodes: 1, Estimate: 15 * time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancelAll(b, j.ID) })
	if !driveUntil(t, b, time.Minute, func() bool { g, _ := b.Job(j.ID); return g.State == Running }) {
		t.Fatal("the long job did not start")
	}
	now = time.Now()
	r, err := b.Submit(ctx, Request{Name: "resv", Command: []string{"/bin/sleep", "3"}, Nodes: 1, Estimate: 30 * time.Second,
		Window: &Window{Earliest: now.Add(40 * time.Second), Latest: now.Add(40*time.Second + 60*time.Second)}}, now)
	if err != nil || r.State != Reserved {
		t.Fatalf("reservation: %+v %v", r, err)
	}
	t.Cleanup(func() { cancelAll(b, r.ID) })
	done := driveUntil(t, b, 3*time.Minute, func() bool { g, _ := b.Job(r.ID); return g.State.Final() })
	gr, _ := b.Job(r.ID)
	t.Logf("reservation job:\n%s", eventText(gr))
	if !done || gr.State != Completed || len(gr.Resv.Preempted) != 1 {
		t.Fatalf("reservation: %s (%s), resv %+v; want completed after preempting the long job", gr.State, gr.Reason, gr.Resv)
	}
	if !strings.Contains(eventText(gr), "binding-wait") {
		t.Fatalf("no binding-wait event: the reservation was asked for before PBS showed the node free")
	}
}
