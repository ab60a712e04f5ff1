package backendrpc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

// methods calls every method of the shim once and returns its error.
func methods(c *backendrpc.Client) map[string]func(context.Context) error {
	spec := &backends.JobSpec{GridID: "g", Nodes: 1, Command: []string{"true"}, Walltime: time.Minute}
	return map[string]func(context.Context) error{
		"Info":   func(ctx context.Context) error { _, err := c.Info(ctx); return err },
		"Submit": func(ctx context.Context) error { _, err := c.Submit(ctx, spec); return err },
		"Status": func(ctx context.Context) error { _, err := c.Status(ctx, []backends.JobID{"1"}); return err },
		"Cancel": func(ctx context.Context) error { return c.Cancel(ctx, "1") },
		"FindByGridID": func(ctx context.Context) error {
			_, err := c.FindByGridID(ctx, "g")
			return err
		},
		"FetchOutputs": func(ctx context.Context) error {
			_, err := c.FetchOutputs(ctx, "1", spec, filepath.Join(os.TempDir(), "gridsub-never-written"))
			return err
		},
		"CreateReservation": func(ctx context.Context) error {
			_, err := c.CreateReservation(ctx, &backends.ReservationSpec{Name: "r", Nodes: 1, Duration: time.Minute})
			return err
		},
		"ShowReservation":   func(ctx context.Context) error { _, err := c.ShowReservation(ctx, "r1"); return err },
		"DeleteReservation": func(ctx context.Context) error { return c.DeleteReservation(ctx, "r1") },
		"Watch":             func(ctx context.Context) error { return c.Watch(ctx, func(backends.JobStatus) {}) },
		// Without the batch capability the plugin submits each spec alone:
		// the job's error is the backend's Submit error.
		"SubmitBatch": func(ctx context.Context) error { return c.SubmitBatch(ctx, []*backends.JobSpec{spec})[0].Err },
	}
}

// failing is a mock whose every method returns err().
func failing(err func() error) *mock {
	return &mock{name: "failing",
		info:   func(context.Context) (*backends.SiteInfo, error) { return nil, err() },
		submit: func(context.Context, *backends.JobSpec) (backends.JobID, error) { return "", err() },
		status: func(context.Context, []backends.JobID) ([]backends.JobStatus, error) { return nil, err() },
		cancel: func(context.Context, backends.JobID) error { return err() },
		find:   func(context.Context, string) ([]backends.JobStatus, error) { return nil, err() },
		fetch: func(context.Context, backends.JobID, *backends.JobSpec, string) ([]string, error) {
			return nil, err()
		},
		create: func(context.Context, *backends.ReservationSpec) (backends.ResvID, error) { return "", err() },
		show:   func(context.Context, backends.ResvID) (*backends.Reservation, error) { return nil, err() },
		del:    func(context.Context, backends.ResvID) error { return err() },
		watch:  func(context.Context, func(backends.JobStatus)) error { return err() },
	}
}

// sentinels is every sentinel of the table, and a couple the table does
// not list (they must cross as "no identity", not as a wrong one).
func allSentinels() []error {
	var out []error
	for _, r := range wire.Table {
		if r.Sentinel != nil {
			out = append(out, r.Sentinel)
		}
	}
	return out
}

// TestErrorIdentityEveryMethod: for every method of the shim and every
// sentinel of the table, wrapped with %w and joined with another, errors.Is
// and backends.Retryable give through the boundary exactly what they give
// on the backend's own error.
func TestErrorIdentityEveryMethod(t *testing.T) {
	cases := map[string]error{}
	for _, r := range wire.Table {
		if r.Sentinel == nil {
			continue
		}
		cases["wrapped "+r.Name] = fmt.Errorf("site x: doing y: %w", r.Sentinel)
		cases["joined "+r.Name] = errors.Join(errors.New("first thing failed"), fmt.Errorf("then: %w", r.Sentinel))
	}
	cases["two sentinels"] = fmt.Errorf("%w and %w", backends.ErrRejected, backends.ErrBadOutput)
	cases["plain"] = errors.New("something without a sentinel")
	for name, orig := range cases {
		c, _ := plugins.TestBackendValue(t, failing(func() error { return orig }))
		for m, call := range methods(c) {
			got := call(context.Background())
			if got == nil {
				t.Errorf("%s: %s returned nil", name, m)
				continue
			}
			for _, s := range allSentinels() {
				if errors.Is(got, s) != errors.Is(orig, s) {
					t.Errorf("%s: %s: errors.Is(%v) = %v through the plugin, %v in process (error %q)",
						name, m, s, errors.Is(got, s), errors.Is(orig, s), got)
				}
			}
			if backends.Retryable(got) != backends.Retryable(orig) {
				t.Errorf("%s: %s: Retryable %v through the plugin, %v in process", name, m, backends.Retryable(got), backends.Retryable(orig))
			}
			if !strings.Contains(got.Error(), orig.Error()) || !strings.Contains(got.Error(), "failing") {
				t.Errorf("%s: %s: message %q lost the plugin's words %q or the plugin's name", name, m, got, orig)
			}
			var re *wire.RemoteError
			if !errors.As(got, &re) || re.Method == "" {
				t.Errorf("%s: %s: %T is not a RemoteError naming the method", name, m, got)
			}
		}
	}
}

// TestContextErrors: the caller's ctx cancelled or past its deadline while
// the plugin works gives ctx.Err() (Retryable for a deadline, as in
// process), and the plugin's side sees its ctx end too.
func TestContextErrors(t *testing.T) {
	released := make(chan error, 100)
	block := func(ctx context.Context) error {
		<-ctx.Done()
		released <- ctx.Err()
		return fmt.Errorf("stopped: %w", ctx.Err())
	}
	m := &mock{name: "slow",
		info:   func(ctx context.Context) (*backends.SiteInfo, error) { return nil, block(ctx) },
		submit: func(ctx context.Context, _ *backends.JobSpec) (backends.JobID, error) { return "", block(ctx) },
		status: func(ctx context.Context, _ []backends.JobID) ([]backends.JobStatus, error) { return nil, block(ctx) },
		cancel: func(ctx context.Context, _ backends.JobID) error { return block(ctx) },
		find:   func(ctx context.Context, _ string) ([]backends.JobStatus, error) { return nil, block(ctx) },
		fetch: func(ctx context.Context, _ backends.JobID, _ *backends.JobSpec, _ string) ([]string, error) {
			return nil, block(ctx)
		},
		create: func(ctx context.Context, _ *backends.ReservationSpec) (backends.ResvID, error) { return "", block(ctx) },
		show:   func(ctx context.Context, _ backends.ResvID) (*backends.Reservation, error) { return nil, block(ctx) },
		del:    func(ctx context.Context, _ backends.ResvID) error { return block(ctx) },
		watch:  func(ctx context.Context, _ func(backends.JobStatus)) error { return block(ctx) },
	}
	c, _ := plugins.TestBackendValue(t, m)
	for name, call := range methods(c) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := call(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !backends.Retryable(err) {
			t.Errorf("%s past its deadline: %v, want DeadlineExceeded (retryable)", name, err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		err = call(ctx)
		if !errors.Is(err, context.Canceled) || backends.Retryable(err) {
			t.Errorf("%s cancelled: %v, want Canceled (not retryable)", name, err)
		}
		for range 2 {
			select {
			case <-released:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the plugin's side never saw its ctx end", name)
			}
		}
	}
}

// TestPluginExited: calls to a plugin whose server is gone fail with
// ErrPluginExited, which is retryable (ErrUnavailable), never hang.
func TestPluginExited(t *testing.T) {
	c, srv := plugins.TestBackendValue(t, &mock{name: "gone"})
	srv.Stop()
	for name, call := range methods(c) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := call(ctx)
		cancel()
		if !errors.Is(err, plugins.ErrPluginExited) || !errors.Is(err, backends.ErrUnavailable) || !backends.Retryable(err) {
			t.Errorf("%s on a dead plugin: %v, want ErrPluginExited (retryable)", name, err)
		}
	}
}

// TestCapabilitiesDeclared: a plugin without the optional capabilities
// declares none, and the shim (one Go type with every method) is not taken
// for a Finder, Fetcher, Reserver... by the broker's As* helpers. Called
// anyway, a missing capability is ErrUnsupported.
func TestCapabilitiesDeclared(t *testing.T) {
	c, _ := plugins.TestBackendValue(t, plainMock{name: "plain"})
	if caps := backends.CapabilitiesOf(c); caps != (backends.Capabilities{}) {
		t.Errorf("capabilities %+v, want none", caps)
	}
	if _, ok := backends.AsFinder(c); ok {
		t.Error("AsFinder true for a plugin that cannot find")
	}
	for name, call := range methods(c) {
		switch name {
		case "Info", "Submit", "Status", "Cancel", "SubmitBatch": // SubmitBatch: one Submit per spec without the capability
			continue
		}
		if err := call(context.Background()); !errors.Is(err, backends.ErrUnsupported) {
			t.Errorf("%s on a plugin without it: %v, want ErrUnsupported", name, err)
		}
	}
	full, _ := plugins.TestBackendValue(t, &mock{name: "full"})
	if caps := backends.CapabilitiesOf(full); caps != (backends.Capabilities{Find: true, Fetch: true, Reserve: true, Push: true, Link: true, Conn: true}) {
		t.Errorf("capabilities %+v, want all", caps)
	}
}

// TestRoundTripValues: what goes in comes out, field by field, both ways.
func TestRoundTripValues(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	spec := &backends.JobSpec{GridID: "g-1", Component: 1, Components: 2, Name: "$(x) 'y'", Script: "echo hi\n",
		Env: map[string]string{"A": "b c"}, WorkDir: "w", Nodes: 3, CoresPerNode: 4, Walltime: 90 * time.Second,
		Inputs:  []backends.StageFile{{Local: "/l/a", Remote: "in/a", Mode: 0o600}},
		Outputs: []string{"out/", "r.txt"}, Reservation: "resv-1", Sim: backends.SimHints{Runtime: time.Minute, ExitCode: 2},
		MemPerNode: 3 << 30, GPUsPerNode: 2, Partition: "gpu", Account: "proj", Setup: "module load x\n"}
	status := backends.JobStatus{ID: "7", GridID: "g-1", Name: "n", State: backends.StateTimeout, Reason: "TimeLimit",
		ExitCode: -1, Signal: 9, Start: start, End: start.Add(time.Hour), NodeList: "a[1-2]"}
	info := &backends.SiteInfo{Name: "s", Kind: "k", Nodes: 8, FreeNodes: 3, CoresPerNode: 2, Partitions: []string{"p", "q"},
		Queued: 4, Running: 5, Busy: []backends.Allocation{{Nodes: 2, Until: start}}, MemPerNode: 4 << 30, GPUsPerNode: 1,
		Accounts: []string{"proj1", "proj2"}}
	resv := &backends.Reservation{ID: "r9", Start: start, End: start.Add(time.Hour), Nodes: 2, NodeList: "a1", State: "ACTIVE"}
	rspec := &backends.ReservationSpec{Name: "r", Start: start, Duration: time.Hour, Nodes: 2, Users: []string{"u"}}
	var gotSpec *backends.JobSpec
	var gotR *backends.ReservationSpec
	m := &mock{name: "rt",
		info: func(context.Context) (*backends.SiteInfo, error) { return info, nil },
		submit: func(_ context.Context, s *backends.JobSpec) (backends.JobID, error) {
			gotSpec = s
			return "7", nil
		},
		status: func(_ context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
			return []backends.JobStatus{status, {ID: ids[1], State: backends.StateLost}}, nil
		},
		find: func(context.Context, string) ([]backends.JobStatus, error) { return []backends.JobStatus{status}, nil },
		create: func(_ context.Context, r *backends.ReservationSpec) (backends.ResvID, error) {
			gotR = r
			return "r9", nil
		},
		show:    func(context.Context, backends.ResvID) (*backends.Reservation, error) { return resv, nil },
		link:    func() (float64, time.Duration, bool) { return 1e-8, 3 * time.Millisecond, true },
		connErr: func() error { return fmt.Errorf("dial: %w", backends.ErrUnavailable) },
	}
	c, _ := plugins.TestBackendValue(t, m)
	ctx := context.Background()
	if id, err := c.Submit(ctx, spec); err != nil || id != "7" {
		t.Fatalf("Submit = %q, %v", id, err)
	}
	if fmt.Sprintf("%+v", gotSpec) != fmt.Sprintf("%+v", spec) {
		t.Errorf("spec arrived as\n%+v\nwant\n%+v", gotSpec, spec)
	}
	st, err := c.Status(ctx, []backends.JobID{"7", "8"})
	if err != nil || len(st) != 2 || !sameStatus(st[0], status) || st[1].ID != "8" || st[1].State != backends.StateLost ||
		!st[1].Start.IsZero() {
		t.Errorf("Status = %+v, %v; want %+v and a lost 8 with zero times", st, err, status)
	}
	if fs, err := c.FindByGridID(ctx, "g-1"); err != nil || len(fs) != 1 || !sameStatus(fs[0], status) {
		t.Errorf("FindByGridID = %+v, %v", fs, err)
	}
	gi, err := c.Info(ctx)
	if err != nil || fmt.Sprintf("%+v", gi) != fmt.Sprintf("%+v", info) {
		t.Errorf("Info = %+v, %v; want %+v", gi, err, info)
	}
	if id, err := c.CreateReservation(ctx, rspec); err != nil || id != "r9" || fmt.Sprintf("%+v", gotR) != fmt.Sprintf("%+v", rspec) {
		t.Errorf("CreateReservation = %q, %v; spec arrived as %+v", id, err, gotR)
	}
	if r, err := c.ShowReservation(ctx, "r9"); err != nil || fmt.Sprintf("%+v", r) != fmt.Sprintf("%+v", resv) {
		t.Errorf("ShowReservation = %+v, %v", r, err)
	}
	// LinkEstimate and ConnErr come from the cache the Ping filled.
	spb, lat, ok := c.LinkEstimate()
	if !ok || spb != 1e-8 || lat != 3*time.Millisecond {
		t.Errorf("LinkEstimate = %v %v %v", spb, lat, ok)
	}
	if err := c.ConnErr(); !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "dial") {
		t.Errorf("ConnErr = %v", err)
	}
}

func sameStatus(a, b backends.JobStatus) bool {
	return a.ID == b.ID && a.GridID == b.GridID && a.Name == b.Name && a.State == b.State && a.Reason == b.Reason &&
		a.ExitCode == b.ExitCode && a.Signal == b.Signal && a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.NodeList == b.NodeList
}

// TestFetchOutputsStreamed: files the plugin fetched arrive under the local
// directory with their content and mode, nested paths included; what
// arrived before a failure is kept and reported; a symbolic link the
// plugin's fetch left pointing outside its directory is not followed.
func TestFetchOutputsStreamed(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789abcdef", 40000) // several chunks
	var mode string
	m := &mock{name: "fetch", fetch: func(_ context.Context, _ backends.JobID, _ *backends.JobSpec, dir string) ([]string, error) {
		var got []string
		write := func(rel, data string, perm os.FileMode) {
			p := filepath.Join(dir, rel)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(data), perm); err != nil {
				t.Error(err)
			}
			got = append(got, p)
		}
		write("gridsub.out", "hello\n", 0o644)
		write("out/deep/big.bin", big, 0o640)
		write("empty", "", 0o644)
		switch mode {
		case "fail":
			return got, fmt.Errorf("fetching out/missing: %w", backends.ErrUnavailable)
		case "symlink":
			p := filepath.Join(dir, "link")
			if err := os.Symlink(secret, p); err != nil {
				t.Fatal(err)
			}
			return append(got, p), nil
		case "outside":
			return append(got, secret), nil
		}
		return got, nil
	}}
	c, _ := plugins.TestBackendValue(t, m)
	ctx := context.Background()
	check := func(dir string, paths []string) {
		t.Helper()
		want := []string{filepath.Join(dir, "gridsub.out"), filepath.Join(dir, "out/deep/big.bin"), filepath.Join(dir, "empty")}
		if !slices.Equal(paths, want) {
			t.Errorf("paths %v, want %v", paths, want)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "out/deep/big.bin")); string(b) != big {
			t.Errorf("big file arrived with %d bytes, want %d", len(b), len(big))
		}
		if fi, err := os.Stat(filepath.Join(dir, "out/deep/big.bin")); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("mode of big.bin: %v %v, want 0640", fi, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "empty")); err != nil || fi.Size() != 0 {
			t.Errorf("empty file: %v %v", fi, err)
		}
	}
	dir := filepath.Join(t.TempDir(), "job")
	paths, err := c.FetchOutputs(ctx, "1", nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	check(dir, paths)

	mode = "fail"
	dir = t.TempDir()
	paths, err = c.FetchOutputs(ctx, "1", nil, dir)
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("failed fetch: %v, want ErrUnavailable", err)
	}
	check(dir, paths)

	for _, mode = range []string{"symlink", "outside"} {
		dir = t.TempDir()
		paths, err = c.FetchOutputs(ctx, "1", nil, dir)
		if err == nil {
			t.Errorf("%s: fetch succeeded", mode)
		}
		check(dir, paths)
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if b, _ := os.ReadFile(p); string(b) == "host secret" {
				t.Errorf("%s: the secret was copied to %s", mode, p)
			}
			return nil
		})
	}
}

// TestWatchPushesInOrder: the sim backend's changes reach the host through
// the Watch stream, in order, and the stream ends with the caller's ctx.
func TestWatchPushesInOrder(t *testing.T) {
	f, _ := plugins.BuiltinBackend("sim")
	c, _ := plugins.TestBackend(t, f, plugins.BackendConfig{Name: "simW", Kind: "sim", Nodes: 1, CoresPerNode: 1})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan backends.JobStatus, 100)
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, func(st backends.JobStatus) { got <- st }) }()
	time.Sleep(100 * time.Millisecond) // let the stream start
	var ids []backends.JobID
	for i := range 3 {
		id, err := c.Submit(context.Background(), &backends.JobSpec{GridID: fmt.Sprintf("w%d", i), Nodes: 1,
			Command: []string{"x"}, Walltime: time.Hour, Sim: backends.SimHints{Runtime: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	now, _ := c.AdvanceTo(context.Background(), time.Time{})
	if _, err := c.AdvanceTo(context.Background(), now.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Every job: pending (or running) ... completed; one job at a time on
	// one node, so the completions come in submission order.
	var completed []backends.JobID
	deadline := time.After(10 * time.Second)
	for len(completed) < 3 {
		select {
		case st := <-got:
			if st.State == backends.StateCompleted {
				completed = append(completed, st.ID)
			}
		case <-deadline:
			t.Fatalf("pushed completions %v, want %v", completed, ids)
		}
	}
	if !slices.Equal(completed, ids) {
		t.Errorf("completions pushed in order %v, want %v", completed, ids)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Watch after cancel: %v", err)
	}
}
