package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/daemon"
)

// testbed is paper 000's three simulated sites.
func testbed() assemble.Spec {
	return assemble.Spec{Sites: []assemble.SiteSpec{
		{Name: "Beijing", Kind: "sim", Nodes: 128, CoresPerNode: 1, H: 1},
		{Name: "Shanghai", Kind: "sim", Nodes: 64, CoresPerNode: 1, H: 1},
		{Name: "Harbin", Kind: "sim", Nodes: 32, CoresPerNode: 1, H: 1},
	}, Seed: 1}
}

// dirs returns a state directory and a socket path short enough for a unix
// socket (108 bytes; t.TempDir() can be longer).
func dirs(t testing.TB) (state, socket string) {
	t.Helper()
	d, err := os.MkdirTemp("", "gsd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "state"), filepath.Join(d, "run", "gridsub.sock")
}

// start runs a daemon at scale virtual seconds per wall second, cycling
// every 50ms.
func start(t testing.TB, state, socket string, scale float64) *daemon.Daemon {
	t.Helper()
	return startWith(t, state, socket, scale, nil)
}

// startWith is start with extra (or overriding) cron entries.
func startWith(t testing.TB, state, socket string, scale float64, cron map[string]string) *daemon.Daemon {
	t.Helper()
	return startOpts(t, daemon.Options{StateDir: state, Socket: socket, TimeScale: scale, Cron: cron})
}

// startOpts starts a daemon on the test bed with opts, fast cycles and
// health probes added to its cron entries (which override them).
func startOpts(t testing.TB, opts daemon.Options) *daemon.Daemon {
	t.Helper()
	c := map[string]string{"cycle": "@every 50ms", "health": "@every 200ms"}
	maps.Copy(c, opts.Cron)
	spec := testbed()
	// Outputs only below the test's directory unless the test says otherwise.
	spec.OutputRoot, spec.InputRoots = filepath.Dir(opts.StateDir), opts.Spec.InputRoots
	spec.Users, spec.Policies.Order, spec.FairShareHalfLife = opts.Spec.Users, opts.Spec.Policies.Order, opts.Spec.FairShareHalfLife
	if opts.Spec.OutputRoot != "" {
		spec.OutputRoot = opts.Spec.OutputRoot
	}
	opts.Spec, opts.SimTick, opts.Cron = spec, 20*time.Millisecond, c
	d, err := daemon.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, d) })
	return d
}

// okAndFailing are two small jobs: one that completes at Harbin and one
// that fails (exit code 3) at Shanghai.
func okAndFailing() []bridge.Request {
	ok := request("ok", 2, 30*time.Second, 5*time.Minute)
	ok.Sites = []string{"Harbin"}
	bad := request("bad", 2, 30*time.Second, 5*time.Minute)
	bad.Sites = []string{"Shanghai"}
	bad.Sim.ExitCode = 3
	return []bridge.Request{ok, bad}
}

func stop(t testing.TB, d *daemon.Daemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// request is a job of the given nodes that runs for run (virtual time) and
// asks for walltime est.
func request(name string, nodes int, run, est time.Duration) bridge.Request {
	return bridge.Request{Name: name, Command: []string{"/bin/true"}, Nodes: nodes, CoresPerNode: 1,
		Estimate: est, Sim: backends.SimHints{Runtime: run}}
}

// waitState polls until the job is in one of the states, or fails the test.
func waitState(t testing.TB, c *api.Client, id string, within time.Duration, states ...bridge.JobState) *bridge.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := c.Job(context.Background(), id)
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if slices.Contains(states, j.State) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after %s (want %v); events %+v", id, j.State, within, states, j.Events)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func kinds(evs []bridge.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func TestSubmitFollowListEventsCancel(t *testing.T) {
	state, sock := dirs(t)
	d := start(t, state, sock, 600)
	c := api.NewUnixClient(sock)
	ctx := context.Background()

	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v, %v", sock, fi.Mode(), err)
	}
	j, err := c.Submit(ctx, request("short", 4, 30*time.Second, 5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if j.State != bridge.Queued || !strings.HasPrefix(j.ID, "g") {
		t.Fatalf("submit answered %s %s, want a queued job with a grid id", j.ID, j.State)
	}
	done := waitState(t, c, j.ID, 15*time.Second, bridge.Completed, bridge.Failed)
	if done.State != bridge.Completed || done.ExitCode != 0 || len(done.Comps) != 1 {
		t.Fatalf("job ended %s exit %d comps %+v", done.State, done.ExitCode, done.Comps)
	}
	evs, err := c.Events(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	k := kinds(evs)
	for _, want := range []string{"submitted", "dispatch", "submitted-remote", "completed"} {
		if !slices.Contains(k, want) {
			t.Errorf("events %v lack %q", k, want)
		}
	}
	if !slices.IsSortedFunc(evs, func(a, b bridge.Event) int { return a.Time.Compare(b.Time) }) {
		t.Errorf("event times go back: %+v", evs)
	}

	// A long job: cancelled while it runs, withdrawn from its site.
	long, err := c.Submit(ctx, request("long", 2, 10*time.Hour, 10*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, long.ID, 15*time.Second, bridge.Running)
	cj, err := c.Cancel(ctx, long.ID)
	if err != nil || cj.State != bridge.Cancelled {
		t.Fatalf("cancel: %+v, %v", cj, err)
	}
	if !slices.Contains(kinds(cj.Events), "cancelled-remote") {
		t.Errorf("cancel of a running job did not reach its site: %v", kinds(cj.Events))
	}
	site := cj.Comps[0].Site
	be, _ := d.Broker().Site(site)
	sts, err := be.Status(ctx, []backends.JobID{cj.Comps[0].RemoteID})
	if err != nil || sts[0].State != backends.StateCancelled {
		t.Fatalf("remote job at %s: %+v, %v", site, sts, err)
	}
	if _, err := c.Cancel(ctx, long.ID); !errors.Is(err, bridge.ErrFinal) {
		t.Fatalf("second cancel: %v, want ErrFinal", err)
	}

	// Lists come from the store, with filters.
	all, _, err := c.List(ctx, bridge.Filter{})
	if err != nil || len(all) != 2 || all[0].ID != j.ID || all[1].ID != long.ID {
		t.Fatalf("list: %v, %v", all, err)
	}
	got, _, err := c.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Cancelled}})
	if err != nil || len(got) != 1 || got[0].ID != long.ID {
		t.Fatalf("list cancelled: %v, %v", got, err)
	}
	got, _, err = c.List(ctx, bridge.Filter{Name: "short", Site: done.Comps[0].Site})
	if err != nil || len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("list by name and site: %v, %v", got, err)
	}
	if _, err := c.Job(ctx, "g999999"); !errors.Is(err, bridge.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	r := request("nowhere", 1, time.Minute, time.Minute)
	r.Sites = []string{"Mars"}
	if _, err := c.Submit(ctx, r); !errors.Is(err, bridge.ErrUnknownSite) {
		t.Fatalf("unknown site: %v", err)
	}
}

func TestOutputDirPlaceholder(t *testing.T) {
	state, sock := dirs(t)
	start(t, state, sock, 600)
	c := api.NewUnixClient(sock)
	out := filepath.Join(filepath.Dir(state), "out") // inside the daemon's output root
	r := request("out", 1, 10*time.Second, time.Minute)
	r.OutputDir = filepath.Join(out, daemon.IDPlaceholder)
	j, err := c.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, j.ID); j.Req.OutputDir != want {
		t.Fatalf("output dir %q, want %q", j.Req.OutputDir, want)
	}
	done := waitState(t, c, j.ID, 15*time.Second, bridge.Completed, bridge.Failed)
	if len(done.Outputs) == 0 || !strings.HasPrefix(done.Outputs[0], filepath.Join(out, j.ID)+string(filepath.Separator)) {
		t.Fatalf("outputs %v, fetch errors %v: not under %s", done.Outputs, done.FetchErrors, filepath.Join(out, j.ID))
	}
	if _, err := os.Stat(done.Outputs[0]); err != nil {
		t.Fatal(err)
	}
}

func TestRestartSeesJobsAgain(t *testing.T) {
	state, sock := dirs(t)
	ctx := context.Background()
	d := start(t, state, sock, 600)
	c := api.NewUnixClient(sock)
	short, err := c.Submit(ctx, request("short", 1, 30*time.Second, 5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, short.ID, 15*time.Second, bridge.Completed)
	long, err := c.Submit(ctx, request("long", 2, 10*time.Hour, 10*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, long.ID, 15*time.Second, bridge.Running)
	clockBefore := d.Now()
	stop(t, d)
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the socket is still there after shutdown: %v", err)
	}
	if _, err := c.Health(ctx); !errors.Is(err, api.ErrNoDaemon) {
		t.Fatalf("health after shutdown: %v, want ErrNoDaemon", err)
	}

	d2 := start(t, state, sock, 600)
	if d2.Now().Before(clockBefore) {
		t.Fatalf("the simulated clock went back across the restart: %s < %s", d2.Now(), clockBefore)
	}
	all, _, err := c.List(ctx, bridge.Filter{})
	if err != nil || len(all) != 2 {
		t.Fatalf("after restart: %v, %v", all, err)
	}
	// The completed job ended before the restart: the store answers for it.
	j, err := c.Job(ctx, short.ID)
	if err != nil || j.State != bridge.Completed {
		t.Fatalf("completed job after restart: %+v, %v", j, err)
	}
	if _, err := c.Cancel(ctx, short.ID); !errors.Is(err, bridge.ErrFinal) {
		t.Fatalf("cancel of a job ended before the restart: %v, want ErrFinal", err)
	}
	// The running job's simulated site did not survive: the first cycle
	// finds it lost and queues it again; it runs again as attempt 2.
	// Until the first cycle after the restart polls the site, the store still
	// says attempt 1 runs: wait for attempt 2, not just for "running".
	var again *bridge.Job
	for deadline := time.Now().Add(15 * time.Second); ; {
		again = waitState(t, c, long.ID, 15*time.Second, bridge.Running)
		if again.Attempts >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if again.Attempts != 2 || !slices.Contains(kinds(again.Events), "requeued") {
		t.Fatalf("recovered job: attempts %d, events %v", again.Attempts, kinds(again.Events))
	}
	// New ids continue after the old ones.
	n, err := c.Submit(ctx, request("after", 1, time.Second, time.Minute))
	if err != nil || n.ID <= long.ID {
		t.Fatalf("new id %v after %s: %v", n, long.ID, err)
	}
}

// scrape reads /metrics over the unix socket.
func scrape(t *testing.T, sock string) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://gridsub/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// metric returns the value of the sample line that starts with name.
func metric(t *testing.T, text, name string) float64 {
	t.Helper()
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no sample %s in\n%s", name, text)
	return 0
}

func TestMetrics(t *testing.T) {
	state, sock := dirs(t)
	start(t, state, sock, 600)
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	// Beijing is 128 nodes: a 128-node job and a queue behind it.
	big, err := c.Submit(ctx, request("big", 128, 10*time.Hour, 10*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	r := request("behind", 128, time.Minute, time.Minute)
	r.Sites = []string{"Beijing"}
	waitState(t, c, big.ID, 15*time.Second, bridge.Running)
	for range 3 {
		if _, err := c.Submit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	bad := request("bad", 0, time.Minute, time.Minute)
	if _, err := c.Submit(ctx, bad); !errors.Is(err, bridge.ErrBadRequest) {
		t.Fatalf("0 nodes: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // a few cycles and a health probe
	m := scrape(t, sock)
	if q := metric(t, m, "gridsub_queue_length"); q != 3 {
		t.Errorf("queue length %v, want 3", q)
	}
	if l := metric(t, m, "gridsub_live_jobs"); l != 1 {
		t.Errorf("live jobs %v, want 1", l)
	}
	if n := metric(t, m, `gridsub_api_submissions_total{result="ok"}`); n != 4 {
		t.Errorf("ok submissions %v, want 4", n)
	}
	if n := metric(t, m, `gridsub_api_submissions_total{result="rejected"}`); n != 1 {
		t.Errorf("rejected submissions %v, want 1", n)
	}
	if n := metric(t, m, `gridsub_remote_submissions_total{site="Beijing"}`); n != 1 {
		t.Errorf("remote submissions at Beijing %v, want 1", n)
	}
	if n := metric(t, m, `gridsub_cycles_total{result="ok"}`); n < 3 {
		t.Errorf("%v cycles in over 300ms at 50ms", n)
	}
	if n := metric(t, m, "gridsub_cycle_duration_seconds_count"); n < 3 {
		t.Errorf("cycle duration count %v", n)
	}
	if n := metric(t, m, `gridsub_site_up{site="Harbin"}`); n != 1 {
		t.Errorf("Harbin up %v", n)
	}
	if n := metric(t, m, `gridsub_site_free_nodes{site="Beijing"}`); n != 0 {
		t.Errorf("Beijing free %v, want 0 (the big job holds it)", n)
	}
}

func TestTCPWithToken(t *testing.T) {
	state, sock := dirs(t)
	d, err := daemon.Start(context.Background(), daemon.Options{Spec: testbed(), StateDir: state, Socket: sock,
		Listen: "127.0.0.1:0", Token: tcpToken, MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, d)
	ctx := context.Background()
	base := "http://" + d.TCPAddr()
	j, err := api.NewClient(base, tcpToken, nil).Submit(ctx, request("tcp", 1, time.Minute, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// The socket needs no token; the same job is there.
	if got, err := api.NewUnixClient(sock).Job(ctx, j.ID); err != nil || got.Req.Name != "tcp" {
		t.Fatalf("over the socket: %+v, %v", got, err)
	}
	var ae *api.Error
	if _, err := api.NewClient(base, "wrong", nil).Job(ctx, j.ID); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %v", err)
	}
	for url, want := range map[string]int{
		base + "/metrics":                        http.StatusUnauthorized, // the API's port wants the token
		"http://" + d.MetricsAddr() + "/metrics": http.StatusOK,
		"http://" + d.MetricsAddr() + "/v1/jobs": http.StatusNotFound, // metrics only
	} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", url, resp.StatusCode, want)
		}
	}
}

func TestSecondDaemonRefused(t *testing.T) {
	state, sock := dirs(t)
	start(t, state, sock, 600)
	_, err := daemon.Start(context.Background(), daemon.Options{Spec: testbed(), StateDir: state + "2", Socket: sock})
	if !errors.Is(err, api.ErrInUse) {
		t.Fatalf("second daemon on the same socket: %v, want ErrInUse", err)
	}
}

func TestBadOptions(t *testing.T) {
	state, sock := dirs(t)
	for _, tc := range []struct {
		opts daemon.Options
		want error
	}{
		{daemon.Options{Spec: testbed(), StateDir: "relative", Socket: sock}, daemon.ErrOptions},
		{daemon.Options{Spec: testbed(), StateDir: state}, daemon.ErrOptions},
		{daemon.Options{Spec: testbed(), StateDir: state, Socket: sock, Listen: "127.0.0.1:0"}, daemon.ErrOptions},
		{daemon.Options{Spec: testbed(), StateDir: state, Socket: sock, Cron: map[string]string{"cycle": "every day"}}, daemon.ErrSchedule},
		{daemon.Options{Spec: testbed(), StateDir: state, Socket: sock, Cron: map[string]string{"cycle": "@every -1s"}}, daemon.ErrSchedule},
	} {
		if _, err := daemon.Start(context.Background(), tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.opts.Cron, err, tc.want)
		}
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Errorf("a refused start left a socket at %s", sock)
	}
}

func TestParseSpec(t *testing.T) {
	now := time.Date(2026, 11, 22, 4, 0, 0, 500_000_000, time.UTC)
	for spec, want := range map[string]time.Time{
		"@every 200ms": now.Add(200 * time.Millisecond),
		"@every 90s":   now.Add(90 * time.Second),
		"@daily":       time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC),
		"*/5 * * * *":  time.Date(2026, 11, 22, 4, 5, 0, 0, time.UTC),
	} {
		s, err := daemon.ParseSpec(spec)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		if got := s.Next(now); !got.Equal(want) {
			t.Errorf("%q: next %s, want %s", spec, got, want)
		}
	}
	for _, bad := range []string{"@every", "@every 0s", "@every soon", "sometimes", "61 * * * *"} {
		if _, err := daemon.ParseSpec(bad); !errors.Is(err, daemon.ErrSchedule) {
			t.Errorf("%q: %v, want ErrSchedule", bad, err)
		}
	}
}

// TestConcurrentClients: many clients submit, list and read jobs at once
// while the daemon cycles; no request fails, every acknowledged submission
// is listed exactly once with a distinct id, and no job is lost. The
// issue's 50 clients for a minute: GRIDSUB_LONG=1 (see docs/daemon.md).
func TestConcurrentClients(t *testing.T) {
	clients, dur := 20, 3*time.Second
	if os.Getenv("GRIDSUB_LONG") != "" {
		clients, dur = 50, time.Minute
	}
	if testing.Short() {
		dur = time.Second
	}
	state, sock := dirs(t)
	start(t, state, sock, 600)
	ctx := context.Background()
	var mu sync.Mutex
	ids := map[string]string{} // id -> name
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	var lists, reads int64
	end := time.Now().Add(dur)
	for w := range clients {
		wg.Go(func() {
			c := api.NewUnixClient(sock)
			var nl, nr int64
			defer func() {
				mu.Lock()
				lists += nl
				reads += nr
				mu.Unlock()
			}()
			for i := 0; time.Now().Before(end); i++ {
				name := fmt.Sprintf("c%d-%d", w, i)
				j, err := c.Submit(ctx, request(name, 1+i%8, time.Duration(1+i%5)*time.Minute, 10*time.Minute))
				if err != nil {
					errc <- fmt.Errorf("client %d submit: %w", w, err)
					return
				}
				mu.Lock()
				if _, dup := ids[j.ID]; dup {
					mu.Unlock()
					errc <- fmt.Errorf("id %s handed out twice", j.ID)
					return
				}
				ids[j.ID] = name
				mu.Unlock()
				got, err := c.Job(ctx, j.ID)
				if err != nil || got.Req.Name != name {
					errc <- fmt.Errorf("client %d: read back %s: %+v, %v", w, j.ID, got, err)
					return
				}
				nr++
				if i%4 == 0 {
					js, _, err := c.List(ctx, bridge.Filter{Name: name})
					if err != nil || len(js) != 1 || js[0].ID != j.ID {
						errc <- fmt.Errorf("client %d: list by name %s: %d jobs, %v", w, name, len(js), err)
						return
					}
					if _, _, err := c.List(ctx, bridge.Filter{States: []bridge.JobState{bridge.Running}, Limit: 100}); err != nil {
						errc <- fmt.Errorf("client %d: list running: %w", w, err)
						return
					}
					nl += 2
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	all, err := api.NewUnixClient(sock).ListAll(ctx, bridge.Filter{Limit: api.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, j := range all {
		if seen[j.ID] {
			t.Errorf("%s listed twice", j.ID)
		}
		seen[j.ID] = true
		if name, ok := ids[j.ID]; !ok || name != j.Req.Name {
			t.Errorf("listed %s (%s) was not acknowledged as %q", j.ID, j.Req.Name, name)
		}
	}
	if len(all) != len(ids) {
		t.Errorf("%d jobs acknowledged, %d listed", len(ids), len(all))
	}
	t.Logf("%d clients, %s: %d submissions (%.0f/s), %d reads, %d lists, no error", clients, dur, len(ids),
		float64(len(ids))/dur.Seconds(), reads, lists)
}

// TestHistoryCleanup: the history_cleanup task prunes ended jobs older than
// the retention and leaves live ones.
func TestHistoryCleanup(t *testing.T) {
	state, sock := dirs(t)
	d, err := daemon.Start(context.Background(), daemon.Options{Spec: testbed(), StateDir: state, Socket: sock,
		TimeScale: 600, SimTick: 20 * time.Millisecond, Retention: time.Millisecond,
		Cron: map[string]string{"cycle": "@every 50ms", "history_cleanup": "@every 100ms"}})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, d)
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	short, err := c.Submit(ctx, request("short", 1, 10*time.Second, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	long, err := c.Submit(ctx, request("long", 1, 10*time.Hour, 10*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		js, _, err := c.List(ctx, bridge.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(js) == 1 {
			if js[0].ID != long.ID || js[0].State.Final() {
				t.Fatalf("the cleanup kept %s (%s), want the live %s", js[0].ID, js[0].State, long.ID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not pruned: %d jobs listed", short.ID, len(js))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := metric(t, scrape(t, sock), "gridsub_history_pruned_total"); n != 1 {
		t.Errorf("pruned total %v, want 1", n)
	}
}
