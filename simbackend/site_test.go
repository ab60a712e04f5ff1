package simbackend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

var bg = context.Background()

func newTestSite(t *testing.T, nodes int, opts EASYOptions, onChange func(backends.JobStatus)) (*Engine, *Site) {
	t.Helper()
	e := NewEngine(epoch0, 1)
	s, err := NewSite(e, SiteConfig{Name: "beijing", Nodes: nodes, CoresPerNode: 4, H: 1.4, EASY: opts, OnChange: onChange})
	if err != nil {
		t.Fatal(err)
	}
	return e, s
}

func spec(grid string, nodes int, wall, run time.Duration) *backends.JobSpec {
	return &backends.JobSpec{GridID: grid, Name: grid, Command: []string{"./sim", grid}, Nodes: nodes,
		Walltime: wall, Sim: backends.SimHints{Runtime: run}}
}

func mustSubmit(t *testing.T, s *Site, sp *backends.JobSpec) backends.JobID {
	t.Helper()
	id, err := s.Submit(bg, sp)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func st(t *testing.T, s *Site, id backends.JobID) backends.JobStatus {
	t.Helper()
	out, err := s.Status(bg, []backends.JobID{id})
	if err != nil || len(out) != 1 {
		t.Fatal(err)
	}
	return out[0]
}

func at(sec int) time.Time { return epoch0.Add(time.Duration(sec) * time.Second) }

func TestNewSiteValidates(t *testing.T) {
	e := NewEngine(epoch0, 1)
	for _, c := range []SiteConfig{{Nodes: 4}, {Name: "x"}, {Name: "x", Nodes: 2, CoresPerNode: -1}, {Name: "x", Nodes: 2, H: -1}} {
		if _, err := NewSite(e, c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

func TestSiteSubmitValidates(t *testing.T) {
	_, s := newTestSite(t, 8, EASYOptions{}, nil)
	cases := map[string]*backends.JobSpec{
		"too many nodes": spec("g", 9, time.Hour, 0),
		"no grid id":     spec("", 1, time.Hour, 0),
		"no walltime":    spec("g", 1, 0, 0),
		"too many cores": func() *backends.JobSpec { sp := spec("g", 1, time.Hour, 0); sp.CoresPerNode = 8; return sp }(),
		"negative run":   spec("g", 1, time.Hour, -time.Second),
		"a GPU":          func() *backends.JobSpec { sp := spec("g", 1, time.Hour, 0); sp.GPUsPerNode = 1; return sp }(),
	}
	for name, sp := range cases {
		if _, err := s.Submit(bg, sp); !errors.Is(err, backends.ErrInvalidSpec) {
			t.Errorf("%s: err = %v, want ErrInvalidSpec", name, err)
		}
	}
	sp := spec("g", 1, time.Hour, 0)
	sp.Reservation = "nope"
	if _, err := s.Submit(bg, sp); !errors.Is(err, backends.ErrRejected) {
		t.Errorf("unknown reservation: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.Submit(ctx, spec("g", 1, time.Hour, 0)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

func TestSiteLifecycle(t *testing.T) {
	var mu sync.Mutex
	var log []string
	e, s := newTestSite(t, 8, EASYOptions{}, func(js backends.JobStatus) {
		mu.Lock()
		log = append(log, fmt.Sprintf("%s:%s", js.ID, js.State))
		mu.Unlock()
	})
	ok := mustSubmit(t, s, spec("ok", 2, 100*time.Second, 10*time.Second))
	fail := mustSubmit(t, s, func() *backends.JobSpec {
		sp := spec("fail", 2, 100*time.Second, 20*time.Second)
		sp.Sim.ExitCode = 3
		return sp
	}())
	long := mustSubmit(t, s, spec("long", 2, 30*time.Second, time.Hour))
	full := mustSubmit(t, s, spec("full", 2, 40*time.Second, 0))
	if ok != "1" || fail != "2" || long != "3" || full != "4" {
		t.Fatalf("ids %s %s %s %s", ok, fail, long, full)
	}
	if got := st(t, s, ok); got.State != backends.StateRunning || !got.Start.Equal(epoch0) || got.ExitCode != -1 || got.Name != "ok" {
		t.Fatalf("ok after submit: %+v", got)
	}
	e.Run()
	want := []struct {
		id    backends.JobID
		state backends.State
		end   int
		exit  int
	}{{ok, backends.StateCompleted, 10, 0}, {fail, backends.StateFailed, 20, 3}, {long, backends.StateTimeout, 30, -1}, {full, backends.StateCompleted, 40, 0}}
	for _, w := range want {
		got := st(t, s, w.id)
		if got.State != w.state || !got.End.Equal(at(w.end)) || got.ExitCode != w.exit {
			t.Errorf("job %s: %s end %v exit %d; want %s at %ds exit %d", w.id, got.State, got.End.Sub(epoch0), got.ExitCode, w.state, w.end, w.exit)
		}
	}
	if got := st(t, s, "99"); got.State != backends.StateLost || got.Reason == "" {
		t.Errorf("unknown id: %+v", got)
	}
	if got := st(t, s, "01"); got.State != backends.StateLost {
		t.Errorf("non-canonical id %q answered as a job", "01")
	}
	mu.Lock()
	defer mu.Unlock()
	wantLog := "1:pending 1:running 2:pending 2:running 3:pending 3:running 4:pending 4:running 1:completed 2:failed 3:timeout 4:completed"
	if strings.Join(log, " ") != wantLog {
		t.Errorf("OnChange log:\n got %s\nwant %s", strings.Join(log, " "), wantLog)
	}
}

func TestSiteEASYBackfill(t *testing.T) {
	e, s := newTestSite(t, 4, EASYOptions{}, nil)
	a := mustSubmit(t, s, spec("a", 3, 100*time.Second, 100*time.Second)) // runs 0..100
	b := mustSubmit(t, s, spec("b", 2, 50*time.Second, 50*time.Second))   // head: shadow 100
	c := mustSubmit(t, s, spec("c", 1, 60*time.Second, 60*time.Second))   // fits now, ends by 100: backfills
	d := mustSubmit(t, s, spec("d", 1, 10*time.Second, 10*time.Second))   // no free node left
	info, err := s.Info(bg)
	if err != nil {
		t.Fatal(err)
	}
	if info.FreeNodes != 0 || info.Running != 2 || info.Queued != 2 || len(info.Busy) != 2 || info.Kind != "sim" {
		t.Fatalf("info: %+v", info)
	}
	sum := info.FreeNodes
	for _, b := range info.Busy {
		sum += b.Nodes
	}
	if sum != 4 || !info.Busy[0].Until.Equal(at(60)) || !info.Busy[1].Until.Equal(at(100)) {
		t.Fatalf("busy %+v", info.Busy)
	}
	if got := st(t, s, b); got.Reason != "Resources" {
		t.Errorf("head pending reason %q, want Resources", got.Reason)
	}
	if got := st(t, s, d); got.Reason != "Priority" {
		t.Errorf("second pending reason %q, want Priority", got.Reason)
	}
	e.Run()
	for _, w := range []struct {
		id    backends.JobID
		start int
	}{{a, 0}, {b, 100}, {c, 0}, {d, 60}} {
		if got := st(t, s, w.id); !got.Start.Equal(at(w.start)) {
			t.Errorf("job %s started at %v, want %ds", w.id, got.Start.Sub(epoch0), w.start)
		}
	}
}

func TestSiteBackfillMustNotDelayHead(t *testing.T) {
	e, s := newTestSite(t, 4, EASYOptions{}, nil)
	mustSubmit(t, s, spec("a", 2, 100*time.Second, 100*time.Second))
	head := mustSubmit(t, s, spec("head", 4, 10*time.Second, 10*time.Second))
	long := mustSubmit(t, s, spec("long", 1, 500*time.Second, 500*time.Second)) // would delay the head
	short := mustSubmit(t, s, spec("short", 2, 90*time.Second, 90*time.Second)) // ends by the shadow time
	e.Run()
	if got := st(t, s, head); !got.Start.Equal(at(100)) {
		t.Errorf("head started %v", got.Start.Sub(epoch0))
	}
	if got := st(t, s, short); !got.Start.Equal(at(0)) {
		t.Errorf("short started %v, want backfilled at 0", got.Start.Sub(epoch0))
	}
	if got := st(t, s, long); !got.Start.Equal(at(110)) {
		t.Errorf("long started %v, want 110 (after the head)", got.Start.Sub(epoch0))
	}
}

func TestSiteCancel(t *testing.T) {
	e, s := newTestSite(t, 2, EASYOptions{}, nil)
	run := mustSubmit(t, s, spec("run", 2, 100*time.Second, 100*time.Second))
	wait := mustSubmit(t, s, spec("wait", 2, 100*time.Second, 100*time.Second))
	next := mustSubmit(t, s, spec("next", 1, 100*time.Second, 100*time.Second))
	if err := s.Cancel(bg, wait); err != nil {
		t.Fatal(err)
	}
	e.RunUntil(at(30))
	if err := s.Cancel(bg, run); err != nil {
		t.Fatal(err)
	}
	if got := st(t, s, run); got.State != backends.StateCancelled || !got.End.Equal(at(30)) {
		t.Fatalf("run: %+v", got)
	}
	if got := st(t, s, next); got.State != backends.StateRunning || !got.Start.Equal(at(30)) {
		t.Fatalf("next should start when run is cancelled: %+v", got)
	}
	if got := st(t, s, wait); got.State != backends.StateCancelled || !got.Start.IsZero() {
		t.Fatalf("wait: %+v", got)
	}
	if err := s.Cancel(bg, run); err != nil {
		t.Fatalf("cancel of an ended job: %v", err)
	}
	if err := s.Cancel(bg, "42"); !errors.Is(err, backends.ErrUnknownJob) {
		t.Fatalf("cancel unknown: %v", err)
	}
	e.Run()
	if got := st(t, s, run); got.State != backends.StateCancelled {
		t.Fatalf("cancelled job ended again: %+v", got)
	}
}

func TestSiteFindAndFetch(t *testing.T) {
	e, s := newTestSite(t, 4, EASYOptions{}, nil)
	sp := spec("grid-7", 3, time.Minute, 30*time.Second)
	sp.Outputs = []string{"out/result.dat", "log.txt"}
	id := mustSubmit(t, s, sp)
	mustSubmit(t, s, spec("other", 1, time.Minute, 0))
	found, err := s.FindByGridID(bg, "grid-7")
	if err != nil || len(found) != 1 || found[0].ID != id || found[0].GridID != "grid-7" {
		t.Fatalf("find: %+v %v", found, err)
	}
	if f, _ := s.FindByGridID(bg, "none"); len(f) != 0 {
		t.Fatal("found a job for an unknown tag")
	}
	dir := t.TempDir()
	if _, err := s.FetchOutputs(bg, id, nil, dir); !errors.Is(err, backends.ErrRejected) {
		t.Fatalf("fetch before the end: %v", err)
	}
	e.Run()
	paths, err := s.FetchOutputs(bg, id, nil, dir)
	if err != nil || len(paths) != 4 { // gridsub.out, gridsub.err and the two outputs
		t.Fatalf("fetch: %v %v", paths, err)
	}
	out, err := os.ReadFile(filepath.Join(dir, backends.StdoutFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"grid-7: ./sim grid-7 ran on beijing nodes 3", "2026-01-01T00:00:00Z to 2026-01-01T00:00:30Z", "exit 0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stdout %q lacks %q", out, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "out", "result.dat")); err != nil || fi.Size() != 0 {
		t.Errorf("output file: %v", err)
	}
	bad := spec("x", 1, time.Minute, 0)
	bad.Outputs = []string{"../escape"}
	if _, err := s.FetchOutputs(bg, id, bad, dir); !errors.Is(err, backends.ErrInvalidSpec) {
		t.Errorf("escaping output path: %v", err)
	}
	if _, err := s.FetchOutputs(bg, "9", nil, dir); !errors.Is(err, backends.ErrUnknownJob) {
		t.Errorf("unknown id: %v", err)
	}
}

func TestSiteReservations(t *testing.T) {
	e, s := newTestSite(t, 4, EASYOptions{}, nil)
	mustSubmit(t, s, spec("busy", 2, 100*time.Second, 100*time.Second)) // 0..100 on 2 nodes
	// 3 nodes over [50, 150) collide with the running job's estimate.
	if _, err := s.CreateReservation(bg, &backends.ReservationSpec{Start: at(50), Duration: 100 * time.Second, Nodes: 3}); !errors.Is(err, backends.ErrRejected) {
		t.Fatalf("over-booked reservation: %v", err)
	}
	rid, err := s.CreateReservation(bg, &backends.ReservationSpec{Name: "demo", Start: at(50), Duration: 100 * time.Second, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.ShowReservation(bg, rid); err != nil || r.State != "pending" || r.Nodes != 2 || !r.Start.Equal(at(50)) || !r.End.Equal(at(150)) {
		t.Fatalf("show: %+v %v", r, err)
	}
	// An ordinary job that would overlap the window on nodes the reservation
	// needs must wait (until "busy" ends at 100); a short one that ends
	// before the window may run now.
	over := mustSubmit(t, s, spec("over", 2, 60*time.Second, 60*time.Second))
	before := mustSubmit(t, s, spec("before", 1, 40*time.Second, 40*time.Second))
	in := spec("in", 2, 30*time.Second, 30*time.Second)
	in.Reservation = "demo"
	inID := mustSubmit(t, s, in)
	late := spec("late", 1, 200*time.Second, 200*time.Second)
	late.Reservation = string(rid)
	lateID := mustSubmit(t, s, late) // waits for "in" (80), then is killed at the reservation's end
	e.RunUntil(at(60))
	if r, _ := s.ShowReservation(bg, rid); r.State != "active" {
		t.Fatalf("reservation state at 60: %s", r.State)
	}
	info, _ := s.Info(bg)
	if info.FreeNodes != 0 {
		t.Fatalf("free at 60: %+v", info)
	}
	e.Run()
	for _, w := range []struct {
		id         backends.JobID
		start, end int
		state      backends.State
	}{{over, 100, 160, backends.StateCompleted}, {before, 0, 40, backends.StateCompleted}, {inID, 50, 80, backends.StateCompleted}, {lateID, 80, 150, backends.StateTimeout}} {
		got := st(t, s, w.id)
		if !got.Start.Equal(at(w.start)) || !got.End.Equal(at(w.end)) || got.State != w.state {
			t.Errorf("job %s: %s %v..%v, want %s %d..%d", w.id, got.State, got.Start.Sub(epoch0), got.End.Sub(epoch0), w.state, w.start, w.end)
		}
	}
	if r, err := s.ShowReservation(bg, rid); !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("show after the end: %+v, %v", r, err)
	}
	if err := s.DeleteReservation(bg, rid); err != nil {
		t.Fatalf("delete of an ended reservation: %v", err)
	}
	if err := s.DeleteReservation(bg, "resv99"); err != nil {
		t.Fatalf("delete of an unknown reservation: %v", err)
	}
	if _, err := s.Submit(bg, in); !errors.Is(err, backends.ErrRejected) {
		t.Fatalf("submit into an ended reservation: %v", err)
	}
}

func TestSiteDeleteReservation(t *testing.T) {
	e, s := newTestSite(t, 4, EASYOptions{}, nil)
	rid, err := s.CreateReservation(bg, &backends.ReservationSpec{Start: at(100), Duration: time.Hour, Nodes: 4})
	if err != nil {
		t.Fatal(err)
	}
	waiting := spec("w", 4, time.Minute, time.Minute)
	waiting.Reservation = string(rid)
	wid := mustSubmit(t, s, waiting)
	blocked := mustSubmit(t, s, spec("b", 1, 200*time.Second, 200*time.Second))
	e.RunUntil(at(10))
	if got := st(t, s, blocked); got.State != backends.StatePending {
		t.Fatalf("job overlapping a full reservation runs: %+v", got)
	}
	if err := s.DeleteReservation(bg, rid); err != nil {
		t.Fatal(err)
	}
	if got := st(t, s, blocked); got.State != backends.StateRunning || !got.Start.Equal(at(10)) {
		t.Fatalf("job not started once the reservation is gone: %+v", got)
	}
	if got := st(t, s, wid); got.State != backends.StateCancelled {
		t.Fatalf("pending job of a deleted reservation: %+v", got)
	}
	e.Run()
}

// siteLog runs a random workload on two sites of one engine and logs every
// state change; the same seed must give the same log byte for byte.
func siteLog(t *testing.T, seed uint64) string {
	e := NewEngine(epoch0, seed)
	var b strings.Builder
	onChange := func(js backends.JobStatus) {
		fmt.Fprintf(&b, "%s %s %s %s\n", e.Now().Sub(epoch0), js.GridID, js.ID, js.State)
	}
	var sites []*Site
	for i, n := range []int{16, 8} {
		s, err := NewSite(e, SiteConfig{Name: fmt.Sprint("s", i), Nodes: n, OnChange: onChange})
		if err != nil {
			t.Fatal(err)
		}
		sites = append(sites, s)
	}
	r := e.Rand()
	for i := 0; i < 200; i++ {
		i := i
		e.At(at(r.IntN(2000)), func() {
			s := sites[r.IntN(2)]
			wall := time.Duration(10+r.IntN(300)) * time.Second
			sp := spec(fmt.Sprint("g", i), 1+r.IntN(8), wall, time.Duration(r.Int64N(int64(wall)*5/4)))
			id, err := s.Submit(bg, sp)
			if err != nil {
				t.Error(err)
				return
			}
			if r.IntN(10) == 0 {
				e.After(time.Duration(r.IntN(100))*time.Second, func() { s.Cancel(bg, id) })
			}
		})
	}
	e.Run()
	return b.String()
}

func TestSiteDeterministic(t *testing.T) {
	a, b := siteLog(t, 5), siteLog(t, 5)
	if a != b {
		t.Fatal("same seed, different logs")
	}
	if a == siteLog(t, 6) || strings.Count(a, "\n") < 400 {
		t.Fatal("log does not depend on the seed or is too short")
	}
}

func TestSiteConcurrentUse(t *testing.T) {
	e, s := newTestSite(t, 16, EASYOptions{}, nil)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Follow(ctx, 10000, time.Millisecond, nil)
	}()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				id, err := s.Submit(bg, spec(fmt.Sprint(g, "-", i), 1+i%4, time.Duration(1+i)*time.Second, 0))
				if err != nil {
					t.Error(err)
					return
				}
				s.Status(bg, []backends.JobID{id})
				s.Info(bg)
			}
		}()
	}
	wg.Wait()
	cancel()
	<-done
	e.Run()
	info, _ := s.Info(bg)
	if info.Running != 0 || info.Queued != 0 || info.FreeNodes != 16 {
		t.Fatalf("site not drained: %+v", info)
	}
}

func TestSiteDownAndUp(t *testing.T) {
	var ends int
	e := NewEngine(epoch0, 1)
	s, err := NewSite(e, SiteConfig{Name: "harbin", Nodes: 2, OnChange: func(js backends.JobStatus) {
		if js.State.Final() {
			ends++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := mustSubmit(t, s, spec("a", 1, time.Minute, 10*time.Second))
	s.SetDown("controller unreachable")
	for name, err := range map[string]error{
		"info":   func() error { _, err := s.Info(bg); return err }(),
		"submit": func() error { _, err := s.Submit(bg, spec("b", 1, time.Minute, 0)); return err }(),
		"status": func() error { _, err := s.Status(bg, []backends.JobID{id}); return err }(),
		"cancel": s.Cancel(bg, id),
		"resv": func() error {
			_, err := s.CreateReservation(bg, &backends.ReservationSpec{Start: at(0), Duration: time.Minute, Nodes: 1})
			return err
		}(),
	} {
		if !errors.Is(err, backends.ErrUnavailable) || !backends.Retryable(err) || !strings.Contains(err.Error(), "controller unreachable") {
			t.Errorf("%s while down: %v", name, err)
		}
	}
	e.Run()
	if ends != 1 {
		t.Fatalf("the job did not end during the outage (%d ends)", ends)
	}
	s.SetUp()
	if got := st(t, s, id); got.State != backends.StateCompleted || !got.End.Equal(at(10)) {
		t.Fatalf("after the outage: %+v", got)
	}
	if _, err := s.Submit(bg, spec("huge", 1, 200*365*24*time.Hour, 0)); !errors.Is(err, backends.ErrInvalidSpec) {
		t.Fatalf("absurd walltime: %v", err)
	}
}

// ForgetEnded: once an ended job's change was pushed, the site no longer
// keeps it (Status says so, FindByGridID finds nothing); without it, it does.
func TestSiteForgetEnded(t *testing.T) {
	for _, forget := range []bool{false, true} {
		e := NewEngine(time.Unix(0, 0), 1)
		var last backends.JobStatus
		s, err := NewSite(e, SiteConfig{Name: "A", Nodes: 2, ForgetEnded: forget, OnChange: func(st backends.JobStatus) { last = st }})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		id, err := s.Submit(ctx, &backends.JobSpec{GridID: "g1-a1", Name: "j", Command: []string{"x"}, Nodes: 1, Walltime: time.Minute,
			Sim: backends.SimHints{Runtime: 30 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		e.RunUntil(time.Unix(60, 0))
		if last.State != backends.StateCompleted || last.ID != id {
			t.Fatalf("forget=%v: last pushed change %+v; want completed", forget, last)
		}
		sts, err := s.Status(ctx, []backends.JobID{id})
		if err != nil {
			t.Fatal(err)
		}
		found, _ := s.FindByGridID(ctx, "g1-a1")
		if forget {
			if sts[0].State != backends.StateLost || !strings.Contains(sts[0].Reason, "no longer keeps ended job") || len(found) != 0 {
				t.Fatalf("forgotten job: status %+v, found %v", sts[0], found)
			}
		} else if sts[0].State != backends.StateCompleted || len(found) != 1 {
			t.Fatalf("kept job: status %+v, found %v", sts[0], found)
		}
	}
}
