package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Harness is what a backend's test gives the suite.
type Harness struct {
	// Backend under test. It must be usable from several goroutines when
	// Parallel is set.
	Backend backends.Backend
	// GridID returns a grid id no other job of this run uses (letters,
	// digits, '-' and '_' only). The suite derives reservation names from it.
	GridID func() string
	// Wait lets d of site time pass: a real sleep for a live site, an
	// advance of the virtual clock for a simulated one.
	Wait func(ctx context.Context, d time.Duration)
	// Now is the site's current time (for reservation windows).
	Now func() time.Time
	// Poll is the interval between Status calls while waiting (default 500ms).
	Poll time.Duration
	// JobTimeout bounds the site time a short job may take to finish
	// (default 2 minutes).
	JobTimeout time.Duration
	// ShortRun is how long the "short" jobs run (default 1s).
	ShortRun time.Duration
	// Parallel runs the independent cases concurrently (live sites; not a
	// simulator whose clock the cases would advance under each other).
	Parallel bool

	// Capabilities.
	Walltime      bool          // the site kills jobs at their walltime (case "timeout")
	TimeoutWall   time.Duration // walltime of the timeout case (default 1 minute)
	Staging       bool          // inputs are staged and Backend is a Fetcher whose outputs are real files
	Reservations  bool          // Backend is a Reserver
	NamesReported bool          // JobStatus.Name carries the job name
	// UnknownID is a job id the site has never issued (default "999999999").
	UnknownID backends.JobID
	// RemoteExists, when set, tells whether a path exists where the job ran
	// (the injection case checks that nothing was executed).
	RemoteExists func(ctx context.Context, path string) (bool, error)
}

func (h *Harness) defaults() {
	if h.Poll <= 0 {
		h.Poll = 500 * time.Millisecond
	}
	if h.JobTimeout <= 0 {
		h.JobTimeout = 2 * time.Minute
	}
	if h.ShortRun <= 0 {
		h.ShortRun = time.Second
	}
	if h.TimeoutWall <= 0 {
		h.TimeoutWall = time.Minute
	}
	if h.UnknownID == "" {
		h.UnknownID = "999999999"
	}
	if h.Now == nil {
		h.Now = time.Now
	}
}

// Run runs the conformance suite. Cases that need the whole site (cancel
// with a blocking job, reservations) run first and one at a time; the
// others then run in parallel when h.Parallel is set.
func Run(t *testing.T, h Harness) {
	h.defaults()
	s := &suite{h: h}
	ctx := context.Background()
	info, err := h.Backend.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Nodes < 1 || info.CoresPerNode < 1 || len(info.Partitions) == 0 {
		t.Fatalf("Info is implausible: %+v", info)
	}
	s.info = info
	t.Run("cancel", s.cancel)
	if h.Reservations {
		t.Run("reservations", s.reservations)
	}
	t.Run("group", func(t *testing.T) {
		for _, c := range []struct {
			name string
			f    func(*testing.T)
			on   bool
		}{
			{"complete", s.complete, true},
			{"nonzero_exit", s.nonzero, true},
			{"timeout", s.timeout, h.Walltime},
			{"unknown_and_order", s.unknown, true},
			{"bad_input", s.badInput, true},
			{"literal_name", s.literal, true},
			{"staging", s.staging, h.Staging},
			{"find_by_grid_id", s.find, true},
			{"batch", s.batch, backends.CapabilitiesOf(h.Backend).Batch},
		} {
			if !c.on {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				if h.Parallel {
					t.Parallel()
				}
				c.f(t)
			})
		}
	})
}

type suite struct {
	h    Harness
	info *backends.SiteInfo
	n    atomic.Int64
}

// spec is a valid one-node job that runs for run and exits with code.
func (s *suite) spec(run time.Duration, code int) *backends.JobSpec {
	secs := int((run + time.Second - 1) / time.Second)
	return &backends.JobSpec{
		GridID: s.h.GridID(), Components: 1, Name: "conformance", Nodes: 1, Walltime: 10 * time.Minute,
		Script: fmt.Sprintf("sleep %d\nexit %d\n", secs, code),
		Sim:    backends.SimHints{Runtime: run, ExitCode: code},
	}
}

func (s *suite) submit(t *testing.T, spec *backends.JobSpec) backends.JobID {
	t.Helper()
	id, err := s.h.Backend.Submit(context.Background(), spec)
	if err != nil {
		t.Fatalf("Submit(%s): %v", spec.GridID, err)
	}
	if id == "" {
		t.Fatalf("Submit(%s) returned an empty id", spec.GridID)
	}
	return id
}

func (s *suite) status(t *testing.T, id backends.JobID) backends.JobStatus {
	t.Helper()
	st, err := s.h.Backend.Status(context.Background(), []backends.JobID{id})
	if err != nil {
		t.Fatalf("Status(%s): %v", id, err)
	}
	if len(st) != 1 || st[0].ID != id {
		t.Fatalf("Status(%s) = %+v, want one status for that id", id, st)
	}
	return st[0]
}

// waitState polls until id reaches a final state or pred holds, within limit
// of site time.
func (s *suite) waitFor(t *testing.T, id backends.JobID, limit time.Duration, pred func(backends.JobStatus) bool) backends.JobStatus {
	t.Helper()
	var waited time.Duration
	for {
		st := s.status(t, id)
		if pred(st) {
			return st
		}
		if waited > limit {
			t.Fatalf("job %s still %s (%s) after %s", id, st.State, st.Reason, limit)
		}
		s.h.Wait(context.Background(), s.h.Poll)
		waited += s.h.Poll
	}
}

func (s *suite) waitFinal(t *testing.T, id backends.JobID, limit time.Duration) backends.JobStatus {
	t.Helper()
	return s.waitFor(t, id, limit, func(st backends.JobStatus) bool { return st.State.Final() })
}

func (s *suite) complete(t *testing.T) {
	spec := s.spec(s.h.ShortRun, 0)
	id := s.submit(t, spec)
	first := s.status(t, id)
	if first.State != backends.StatePending && first.State != backends.StateRunning {
		t.Errorf("right after submit: state %s, want pending or running", first.State)
	}
	st := s.waitFinal(t, id, s.h.JobTimeout)
	if st.State != backends.StateCompleted || st.ExitCode != 0 {
		t.Fatalf("final status %+v, want completed with exit code 0", st)
	}
	if st.GridID != "" && st.GridID != spec.GridID {
		t.Errorf("grid id %q, want %q", st.GridID, spec.GridID)
	}
}

func (s *suite) nonzero(t *testing.T) {
	id := s.submit(t, s.spec(s.h.ShortRun, 3))
	st := s.waitFinal(t, id, s.h.JobTimeout)
	if st.State != backends.StateFailed || st.ExitCode != 3 {
		t.Fatalf("final status %+v, want failed with exit code 3", st)
	}
}

func (s *suite) timeout(t *testing.T) {
	spec := s.spec(30*time.Minute, 0)
	spec.Walltime = s.h.TimeoutWall
	id := s.submit(t, spec)
	st := s.waitFinal(t, id, s.h.TimeoutWall+3*time.Minute)
	if st.State != backends.StateTimeout {
		t.Fatalf("final status %+v, want timeout", st)
	}
}

// cancel: a job holding every node keeps a second one pending; cancel both
// (pending, then running), twice each.
func (s *suite) cancel(t *testing.T) {
	ctx := context.Background()
	block := s.spec(30*time.Minute, 0)
	block.Nodes = s.info.Nodes
	bid := s.submit(t, block)
	s.waitFor(t, bid, s.h.JobTimeout, func(st backends.JobStatus) bool {
		return st.State == backends.StateRunning || st.State.Final()
	})
	pid := s.submit(t, s.spec(s.h.ShortRun, 0))
	if st := s.status(t, pid); st.State != backends.StatePending {
		t.Fatalf("job behind a whole-site job is %s, want pending", st.State)
	}
	for _, id := range []backends.JobID{pid, bid} {
		if err := s.h.Backend.Cancel(ctx, id); err != nil {
			t.Fatalf("Cancel(%s): %v", id, err)
		}
		st := s.waitFinal(t, id, s.h.JobTimeout)
		if st.State != backends.StateCancelled {
			t.Errorf("job %s after cancel: %+v, want cancelled", id, st)
		}
		if err := s.h.Backend.Cancel(ctx, id); err != nil {
			t.Errorf("second Cancel(%s) = %v, want nil", id, err)
		}
	}
}

func (s *suite) unknown(t *testing.T) {
	a := s.submit(t, s.spec(s.h.ShortRun, 0))
	b := s.submit(t, s.spec(s.h.ShortRun, 0))
	ids := []backends.JobID{b, s.h.UnknownID, a, "not-a-job-id"}
	st, err := s.h.Backend.Status(context.Background(), ids)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if len(st) != len(ids) {
		t.Fatalf("Status returned %d entries for %d ids", len(st), len(ids))
	}
	for i, id := range ids {
		if st[i].ID != id {
			t.Errorf("entry %d is for %q, want %q (order must be kept)", i, st[i].ID, id)
		}
	}
	for _, i := range []int{1, 3} {
		if st[i].State != backends.StateLost {
			t.Errorf("unknown id %q: state %s, want lost", ids[i], st[i].State)
		}
	}
	for _, i := range []int{0, 2} {
		if st[i].State == backends.StateLost || st[i].State == backends.StateUnknown {
			t.Errorf("live job %s: state %s", ids[i], st[i].State)
		}
	}
	s.waitFinal(t, a, s.h.JobTimeout)
	s.waitFinal(t, b, s.h.JobTimeout)
}

func (s *suite) badInput(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		mut  func(*backends.JobSpec)
	}{
		{"zero nodes", func(j *backends.JobSpec) { j.Nodes = 0 }},
		{"more nodes than the site has", func(j *backends.JobSpec) { j.Nodes = s.info.Nodes + 1 }},
		{"no command", func(j *backends.JobSpec) { j.Script, j.Command = "", nil }},
	}
	for _, c := range cases {
		spec := s.spec(s.h.ShortRun, 0)
		c.mut(spec)
		id, err := s.h.Backend.Submit(ctx, spec)
		if err == nil {
			_ = s.h.Backend.Cancel(ctx, id)
			t.Errorf("%s: accepted as job %s", c.name, id)
			continue
		}
		if !errors.Is(err, backends.ErrInvalidSpec) && !errors.Is(err, backends.ErrRejected) {
			t.Errorf("%s: error %v does not wrap ErrInvalidSpec or ErrRejected", c.name, err)
		}
		if len(err.Error()) < len("invalid job spec: x") {
			t.Errorf("%s: error %q does not say what is wrong", c.name, err)
		}
	}
	id := s.submit(t, s.spec(s.h.ShortRun, 0))
	if st := s.waitFinal(t, id, s.h.JobTimeout); st.State != backends.StateCompleted {
		t.Fatalf("after bad input the site no longer runs jobs: %+v", st)
	}
}

func (s *suite) literal(t *testing.T) {
	ctx := context.Background()
	spec := s.spec(s.h.ShortRun, 0)
	canary := fmt.Sprintf("/tmp/gridsub-owned-%s", spec.GridID)
	spec.Name = fmt.Sprintf("$(touch %s); rm -rf ~ `touch %s` '\"", canary, canary)
	spec.Script = ""
	spec.Command = []string{"echo", "$(touch " + canary + ")", "`touch " + canary + "`", "'", "a  b"}
	spec.Env = map[string]string{"GRIDSUB_TEST": "$(touch " + canary + ")"}
	id := s.submit(t, spec)
	st := s.waitFinal(t, id, s.h.JobTimeout)
	if st.State != backends.StateCompleted {
		t.Fatalf("job with a hostile name: %+v, want completed", st)
	}
	if s.h.NamesReported && st.Name != spec.Name {
		t.Errorf("name came back as %q, want %q", st.Name, spec.Name)
	}
	if s.h.RemoteExists != nil {
		ok, err := s.h.RemoteExists(ctx, canary)
		if err != nil {
			t.Fatalf("checking %s: %v", canary, err)
		}
		if ok {
			t.Fatalf("%s exists: part of the name or command was executed", canary)
		}
	}
	if s.h.Staging {
		dir := t.TempDir()
		if _, err := mustFetcher(t, s.h.Backend).FetchOutputs(ctx, id, spec, dir); err != nil {
			t.Fatalf("FetchOutputs: %v", err)
		}
		out, err := os.ReadFile(filepath.Join(dir, "gridsub.out"))
		if err != nil {
			t.Fatalf("stdout: %v", err)
		}
		want := "$(touch " + canary + ") `touch " + canary + "` ' a  b\n"
		if string(out) != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
	}
}

func (s *suite) staging(t *testing.T) {
	ctx := context.Background()
	f, ok := backends.AsFetcher(s.h.Backend)
	if !ok {
		t.Fatal("harness says Staging but the backend is not a Fetcher")
	}
	local := t.TempDir()
	payload := bytes.Repeat([]byte("gridsub staging\n"), 4096)
	in := filepath.Join(local, "input.dat")
	if err := os.WriteFile(in, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := s.spec(s.h.ShortRun, 0)
	spec.Inputs = []backends.StageFile{{Local: in, Remote: "in/input.dat"}}
	spec.Outputs = []string{"out/result.txt"}
	spec.Script = "mkdir -p out\nwc -c < in/input.dat > out/result.txt\nsha256sum < in/input.dat | cut -d' ' -f1 >> out/result.txt\n"
	id := s.submit(t, spec)
	if st := s.waitFinal(t, id, s.h.JobTimeout); st.State != backends.StateCompleted {
		t.Fatalf("staging job: %+v", st)
	}
	got := t.TempDir()
	paths, err := f.FetchOutputs(ctx, id, spec, got)
	if err != nil {
		t.Fatalf("FetchOutputs: %v", err)
	}
	res, err := os.ReadFile(filepath.Join(got, "out", "result.txt"))
	if err != nil {
		t.Fatalf("fetched outputs %v lack out/result.txt: %v", paths, err)
	}
	want := fmt.Sprintf("%d\n%s\n", len(payload), sha256Hex(payload))
	if string(res) != want {
		t.Errorf("result %q, want %q (the job did not see the staged input intact)", res, want)
	}
	spec.Outputs = []string{"out/missing.txt"}
	if _, err := f.FetchOutputs(ctx, id, spec, t.TempDir()); err == nil {
		t.Error("fetching an output the job never wrote succeeded")
	}
}

func (s *suite) find(t *testing.T) {
	fd, ok := backends.AsFinder(s.h.Backend)
	if !ok {
		t.Skip("backend is not a Finder")
	}
	spec := s.spec(s.h.ShortRun, 0)
	id := s.submit(t, spec)
	got, err := fd.FindByGridID(context.Background(), spec.GridID)
	if err != nil {
		t.Fatalf("FindByGridID: %v", err)
	}
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("FindByGridID(%s) = %+v, want exactly job %s", spec.GridID, got, id)
	}
	none, err := fd.FindByGridID(context.Background(), s.h.GridID())
	if err != nil || len(none) != 0 {
		t.Fatalf("FindByGridID(unused id) = %+v, %v; want nothing", none, err)
	}
	s.waitFinal(t, id, s.h.JobTimeout)
}

func (s *suite) reservations(t *testing.T) {
	ctx := context.Background()
	rv, ok := backends.AsReserver(s.h.Backend)
	if !ok {
		t.Fatal("harness says Reservations but the backend is not a Reserver")
	}
	name := "r-" + s.h.GridID()
	now := s.h.Now()
	id, err := rv.CreateReservation(ctx, &backends.ReservationSpec{Name: name, Start: now, Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		t.Fatalf("CreateReservation: %v", err)
	}
	deleted := false
	defer func() {
		if !deleted {
			_ = rv.DeleteReservation(ctx, id)
		}
	}()
	r, err := rv.ShowReservation(ctx, id)
	if err != nil {
		t.Fatalf("ShowReservation: %v", err)
	}
	if r.ID != id || r.Nodes != 1 || r.End.Sub(r.Start) < 10*time.Minute-time.Second || r.Start.Sub(now) > time.Minute {
		t.Errorf("ShowReservation = %+v, want 1 node for 10 minutes from about %s", r, now)
	}
	// An overlapping reservation for every node cannot be granted in full.
	other := "r-" + s.h.GridID()
	if oid, err := rv.CreateReservation(ctx, &backends.ReservationSpec{Name: other, Start: now, Duration: 10 * time.Minute, Nodes: s.info.Nodes}); err == nil {
		_ = rv.DeleteReservation(ctx, oid)
		t.Errorf("overlapping reservation for all %d nodes was granted as %s", s.info.Nodes, oid)
	} else if !errors.Is(err, backends.ErrRejected) {
		t.Errorf("overlapping reservation: %v, want ErrRejected", err)
	}
	spec := s.spec(s.h.ShortRun, 0)
	spec.Reservation = string(id)
	jid := s.submit(t, spec)
	if st := s.waitFinal(t, jid, s.h.JobTimeout); st.State != backends.StateCompleted {
		t.Fatalf("job in reservation: %+v", st)
	}
	if err := rv.DeleteReservation(ctx, id); err != nil {
		t.Fatalf("DeleteReservation: %v", err)
	}
	deleted = true
	if err := rv.DeleteReservation(ctx, id); err != nil {
		t.Errorf("second DeleteReservation: %v, want nil", err)
	}
	if _, err := rv.ShowReservation(ctx, id); err == nil {
		t.Error("ShowReservation after delete succeeded")
	}
}
