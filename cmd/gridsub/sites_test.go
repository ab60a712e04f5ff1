package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/assemble/fakesite"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/bridge/store"
)

// twoSites: Remote (8 nodes, a measured link) and Down (4 nodes, failing
// while down is set, with a line break in its error), simulated sites
// behind a real-site kind.
func twoSites(down *atomic.Bool) assemble.Spec {
	return fakesite.Spec(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
		fakesite.Site{Name: "Remote", Kind: "slurm", Nodes: 8, Cores: 1, H: 1, Wrap: func(b backends.Backend) backends.Backend {
			return fakesite.Measured{Flaky: fakesite.Flaky{Backend: b}, SecPerByte: 1e-6, Latency: 20 * time.Millisecond}
		}},
		fakesite.Site{Name: "Down", Kind: "slurm", Nodes: 4, Cores: 1, H: 1, Wrap: func(b backends.Backend) backends.Backend {
			return fakesite.Flaky{Backend: b, Down: down, Err: errors.New("ssh: dial tcp 10.0.0.5:22:\n connect: connection refused")}
		}})
}

func startDaemon(t *testing.T, state, sock string, spec assemble.Spec, health string) *daemon.Daemon {
	t.Helper()
	d, err := daemon.Start(context.Background(), daemon.Options{Spec: spec, StateDir: state, Socket: sock,
		Cron: map[string]string{"cycle": "@every 1h", "health": health}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	return d
}

// waitSites polls the daemon until every site's status starts as wanted.
func waitSites(t *testing.T, sock string, want map[string]string) {
	t.Helper()
	c := api.NewUnixClient(sock)
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, err := c.SiteStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range r.Details {
			if strings.HasPrefix(s.Status, want[s.Name]) {
				n++
			}
		}
		if n == len(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sites %+v, want %v", r.Details, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// row returns the table line of the named site.
func row(t *testing.T, out, name string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	t.Fatalf("no row for %s in\n%s", name, out)
	return ""
}

func TestSitesFromDaemon(t *testing.T) {
	d, err := os.MkdirTemp("", "gssites")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	down := new(atomic.Bool)

	// Before any probe.
	d1 := startDaemon(t, state, sock, twoSites(down), "@every 1h")
	code, stdout, stderr := cli("sites")
	if code != 0 || !strings.HasPrefix(stdout, "daemon: "+sock+"\n") || !strings.Contains(stdout, "not probed yet: Remote, Down") {
		t.Fatalf("sites before a probe: exit %d\n%s%s", code, stdout, stderr)
	}
	if r := row(t, stdout, "Remote"); !regexp.MustCompile(`^Remote +slurm +8 +1\.00 +not probed +- +- +- +- +0/0 +up +1\.00 +0/0 +never`).MatchString(r) {
		t.Errorf("Remote before a probe: %q", r)
	}
	d1.Shutdown(context.Background())

	// Probed: Remote answers; Down answers once, then fails. A job failed
	// at Down; a trust policy (here: the test) has scored Remote.
	startDaemon(t, state, sock, twoSites(down), "@every 100ms")
	waitSites(t, sock, map[string]string{"Remote": "ok", "Down": "ok"})
	down.Store(true)
	waitSites(t, sock, map[string]string{"Remote": "ok", "Down": "unreachable"})
	st, err := store.Open(context.Background(), filepath.Join(state, daemon.DBName), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetTrust(context.Background(), "Remote", 0.75, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), &bridge.Job{ID: "x1", State: bridge.Failed, SiteFault: true, Comps: []bridge.Component{{Site: "Down", Nodes: 1}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, stdout, stderr = cli("sites")
	if code != 0 {
		t.Fatalf("sites: exit %d %s", code, stderr)
	}
	t.Logf("gridsub sites:\n%s", stdout)
	for _, col := range []string{"NAME", "KIND", "NODES", "H", "HEALTH", "LOAD", "TRUST", "BANDWIDTH", "LATENCY", "DONE/FAILED", "AVAIL", "R(1h)", "CHAIN", "LAST PROBE"} {
		if !strings.Contains(stdout, col) {
			t.Errorf("no %s column:\n%s", col, stdout)
		}
	}
	if r := row(t, stdout, "Remote"); !regexp.MustCompile(`^Remote +slurm +8 +1\.00 +ok +8/0/0 +0\.75 +1\.0 MB/s +20ms +0/0 +up +1\.00 +0/0 +(just now|\ds ago)`).MatchString(r) {
		t.Errorf("Remote: %q", r)
	}
	if r := row(t, stdout, "Down"); !regexp.MustCompile(`^Down +slurm +4 +1\.00 +unreachable +4/0/0 +- +- +- +0/1 +down +0\.00 +1/1 +(just now|\ds ago)`).MatchString(r) {
		t.Errorf("Down (last known load, no trust, no link, one failed job): %q", r)
	}
	if !regexp.MustCompile(`(?m)^Down: unreachable: ssh: dial tcp 10\.0\.0\.5:22: connect: connection refused \(load as of the last answer, (just now|\ds ago)\)$`).MatchString(stdout) {
		t.Errorf("no note saying why Down is unreachable:\n%s", stdout)
	}

	code, stdout, _ = cli("sites", "--output", "json")
	var recs []api.Site
	if err := json.Unmarshal([]byte(stdout), &recs); err != nil || code != 0 || len(recs) != 2 {
		t.Fatalf("sites -o json: exit %d %v\n%s", code, err, stdout)
	}
	if r := recs[0]; r.Name != "Remote" || r.Trust == nil || *r.Trust != 0.75 || r.TrustComputedAt == nil ||
		*r.BandwidthBytesPerSecond != 1e6 || *r.FreeNodes != 8 || r.LastProbe == nil {
		t.Errorf("Remote JSON: %+v", r)
	}
	if r := recs[1]; !strings.HasPrefix(r.Status, "unreachable: ssh: dial tcp") || r.Trust != nil || r.JobsFailed != 1 || *r.FreeNodes != 4 {
		t.Errorf("Down JSON: %+v", r)
	}
	for _, k := range []string{`"trust": null`, `"bandwidth_bytes_per_second": null`} {
		if !strings.Contains(stdout, k) {
			t.Errorf("JSON lacks %s", k)
		}
	}

	// --embedded and --offline do not ask the daemon: they show this
	// command's configuration (the built-in testbed), not the daemon's sites.
	code, stdout, _ = cli("sites", "--embedded")
	if code != 0 || !strings.HasPrefix(stdout, "configuration: ") || !strings.Contains(stdout, "Beijing") || strings.Contains(stdout, "Remote") {
		t.Errorf("sites --embedded: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = cli("sites", "--offline")
	if code != 0 || !strings.Contains(stdout, "not contacted") || strings.Contains(stdout, "Remote") {
		t.Errorf("sites --offline: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := cli("sites", "--offline", "--embedded"); code != exitUsage || !strings.Contains(stderr, "offline") {
		t.Errorf("--offline --embedded: exit %d %q", code, stderr)
	}
}

// Without a daemon, `gridsub sites` probes from here as before.
func TestSitesWithoutDaemon(t *testing.T) {
	code, stdout, stderr := cli("sites")
	if code != 0 || !strings.HasPrefix(stdout, "configuration: ") || !strings.Contains(stdout, "ENDPOINT") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if r := row(t, stdout, "Harbin"); !regexp.MustCompile(`^Harbin +sim +32 +32 +4 +1\.00 +0 +0 +ok`).MatchString(r) {
		t.Errorf("Harbin probed from here: %q", r)
	}
}

// namesOnly is a daemon from before site health: GET /v1/sites has names.
type namesOnly struct{}

func (namesOnly) Submit(context.Context, bridge.Request, time.Time) (*bridge.Job, error) {
	return nil, bridge.ErrBadRequest
}
func (namesOnly) Job(string) (*bridge.Job, error) { return nil, bridge.ErrNotFound }
func (namesOnly) ListJobs(context.Context, bridge.Filter) ([]*bridge.Job, error) {
	return nil, nil
}
func (namesOnly) Cancel(context.Context, string, time.Time) error { return bridge.ErrNotFound }
func (namesOnly) SiteNames() []string                             { return []string{"Old"} }

func TestSitesFromOlderDaemon(t *testing.T) {
	d, err := os.MkdirTemp("", "gsold")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	sock := filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	l, err := api.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(namesOnly{}, api.ServerOptions{})
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	code, stdout, _ := cli("sites")
	if code != 0 || !regexp.MustCompile(`(?m)^Old +0 +0\.00 +unknown`).MatchString(stdout) ||
		!strings.Contains(stdout, "does not record site health (upgrade it, or use --embedded)") {
		t.Errorf("sites from an older daemon: exit %d\n%s", code, stdout)
	}
}

func TestHumanUnits(t *testing.T) {
	for in, want := range map[float64]string{0: "0.0 B/s", 950: "950 B/s", 999.6: "1.0 kB/s", 1e6: "1.0 MB/s",
		1.25e6: "1.2 MB/s", 117e3: "117 kB/s", 3.2e9: "3.2 GB/s", 12.5e9: "12 GB/s"} {
		if got := humanRate(in); got != want {
			t.Errorf("humanRate(%g) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0.575: "575ms", 0.0004: "400µs", 1.23456: "1.235s", 42.31: "42.3s"} {
		if got := humanLatency(in); got != want {
			t.Errorf("humanLatency(%g) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[time.Duration]string{-time.Second: "just now", 0: "just now", 42 * time.Second: "42s ago",
		5*time.Minute + 59*time.Second: "5m ago", 3 * time.Hour: "3h ago", 47 * time.Hour: "47h ago", 72 * time.Hour: "3d ago"} {
		if got := ago(in); got != want {
			t.Errorf("ago(%s) = %q, want %q", in, got, want)
		}
	}
}
