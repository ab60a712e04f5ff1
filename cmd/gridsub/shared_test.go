package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/bridge/store/pgstore"
	"github.com/gridsub/gridsub/bridge/store/pgstore/pgtest"
	"github.com/gridsub/gridsub/simbackend/sshsite"
)

// sharedGrid is brokers sharing one PostgreSQL store in front of two
// SSH-served simulated SLURM sites that outlive them (served by this test
// binary: they count every execution of every grid job).
type sharedGrid struct {
	t       *testing.T
	bin     string
	sites   []*sshsite.Site
	st      *pgstore.Postgres // the test's own view of the shared store
	markers string            // each execution of a job leaves a file here: <remote tag>.<pid>
	states  []string
	socks   []string
	mu      sync.Mutex
	procs   []*serveProc
	stopped []bool
}

func newSharedGrid(t *testing.T, brokers int, lease time.Duration) *sharedGrid {
	t.Helper()
	pg := pgtest.StartT(t)
	dsn := pg.CreateDB(t, "shared")
	cfg, sites := simGrid(t, []int{16, 16}, []string{sshsite.SLURM, sshsite.SLURM}, "greedy-easy")
	// A quick scheduler budget, as the daemon kill test's: the test is
	// about failover, not about sparing the sites.
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.ReplaceAll(string(b), "    ssh:\n", "    budget: {per_minute: 600, burst: 60, poll_fast: 1s, poll_slow: 1s, capacity_every: 2s, backoff_max: 4s}\n    ssh:\n"))
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "store: {kind: postgres, dsn: %q, password_file: %s, shared: true, lease: %s}\n", dsn, pg.PasswordFile, lease)
	f.Close()
	t.Setenv("GRIDSUB_CONFIG", cfg)
	st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, PasswordFile: pg.PasswordFile}, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d := t.TempDir()
	g := &sharedGrid{t: t, bin: buildBinary(t), sites: sites, st: st, markers: filepath.Join(d, "markers")}
	if err := os.Mkdir(g.markers, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range brokers {
		g.states = append(g.states, filepath.Join(d, fmt.Sprintf("b%d", i), "state"))
		g.socks = append(g.socks, filepath.Join(d, fmt.Sprintf("b%d.sock", i)))
		g.procs = append(g.procs, nil)
		g.stopped = append(g.stopped, false)
		g.start(i)
	}
	return g
}

func (g *sharedGrid) start(i int) {
	p := startServe(g.t, g.bin, g.states[i], g.socks[i])
	g.mu.Lock()
	g.procs[i] = p
	g.mu.Unlock()
}

func (g *sharedGrid) proc(i int) *serveProc {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.procs[i]
}

// service asks broker i who leads.
func (g *sharedGrid) service(i int) (daemon.Leadership, error) {
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", g.socks[i])
	}}}
	var l daemon.Leadership
	resp, err := hc.Get("http://gridsub" + strings.TrimPrefix(daemon.ServiceRoute, "GET "))
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return l, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return l, json.NewDecoder(resp.Body).Decode(&l)
}

// leader waits for a leader other than not (by name) and returns its
// index and the leadership.
func (g *sharedGrid) leader(not string, within time.Duration) (int, daemon.Leadership) {
	g.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for i := range g.socks {
			l, err := g.service(i)
			if err == nil && l.Role == "leader" && l.Leader == l.Broker && l.Broker != not {
				return i, l
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.t.Fatalf("no leader (other than %q) within %s", not, within)
	return -1, daemon.Leadership{}
}

// client submits tiny jobs to random brokers until stop is closed and
// records every acknowledged id with its acknowledgement time.
func (g *sharedGrid) clients(n int, stop <-chan struct{}, wg *sync.WaitGroup, acked map[string]time.Time, mu *sync.Mutex) {
	for c := range n {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				sock := g.socks[r.IntN(len(g.socks))]
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				j, err := api.NewUnixClient(sock).Submit(ctx, bridge.Request{Name: "ha", Nodes: 1, Estimate: 2 * time.Minute,
					Script: fmt.Sprintf("#!/bin/sh\n: > %q/\"$GRIDSUB_GRID_ID.$$\"\nsleep 0.3\n", g.markers)})
				cancel()
				if err == nil {
					mu.Lock()
					acked[j.ID] = time.Now()
					mu.Unlock()
				} else {
					time.Sleep(100 * time.Millisecond) // its broker is down: try another
				}
				time.Sleep(time.Duration(1500+r.IntN(1000)) * time.Millisecond)
			}
		})
	}
}

// checkOnce waits until every acknowledged job ended and checks that each
// completed having run exactly once at the sites, and nothing ran twice.
func (g *sharedGrid) checkOnce(acked map[string]time.Time, within time.Duration) {
	t := g.t
	ctx := context.Background()
	deadline := time.Now().Add(within)
	var left []string
	for {
		left = left[:0]
		for id := range acked {
			j, err := g.st.Get(ctx, id)
			if err != nil {
				t.Fatalf("acknowledged job %s is not in the store: %v", id, err)
			}
			if !j.State.Final() {
				left = append(left, id)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			slices.Sort(left)
			t.Fatalf("%d of %d acknowledged jobs still not ended after %s: %v", len(left), len(acked), within, left[:min(10, len(left))])
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The sites count executions by remote tag (bridge.RemoteTag: the
	// job id and "-a" and the attempt): a job that ran once ran one
	// attempt once.
	runs := map[string]int{}
	for _, s := range g.sites {
		for tag, n := range s.Executions() {
			id := tag
			if i := strings.LastIndex(tag, "-a"); i > 0 {
				id = tag[:i]
			}
			runs[id] += n
		}
	}
	// And by the marker files the executions left (the keyed job of
	// TestSharedStoreStoppedLeader leaves none).
	marks := map[string]int{}
	es, err := os.ReadDir(g.markers)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		tag := e.Name()[:strings.LastIndex(e.Name(), ".")]
		marks[tag[:strings.LastIndex(tag, "-a")]]++
	}
	for id := range acked {
		j, _ := g.st.Get(ctx, id)
		if j.State != bridge.Completed {
			t.Errorf("job %s ended %s (%s), want completed", id, j.State, j.Reason)
		}
		if runs[id] != 1 {
			t.Errorf("job %s ran %d times at the sites, want exactly once", id, runs[id])
		}
		if j.Req.Name == "ha" && marks[id] != 1 {
			t.Errorf("job %s left %d marker files, want exactly one", id, marks[id])
		}
	}
	for id, n := range marks {
		if n > 1 {
			t.Errorf("job %s left %d marker files", id, n)
		}
	}
	for id, n := range runs {
		if n > 1 {
			t.Errorf("job %s ran %d times at the sites", id, n)
		}
	}
}

// TestSharedStoreFailover: three brokers on one PostgreSQL store, clients
// submitting to any of them, the leader SIGKILLed again and again (3 times;
// 20 with GRIDSUB_LONG=1) and restarted as a follower: a follower takes
// over each time, every acknowledged job ends completed having run exactly
// once (counted by the sites), and the failover time — from the kill to
// the first dispatch of a job acknowledged after it — is measured.
func TestSharedStoreFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, two SSH sites and three brokers")
	}
	kills := 3
	if os.Getenv("GRIDSUB_LONG") != "" {
		kills = 20
	}
	g := newSharedGrid(t, 3, 2*time.Second)
	_, first := g.leader("", 30*time.Second)
	t.Logf("first leader %s, epoch %d, followers %v", first.Leader, first.Epoch, first.Followers)
	if len(first.Followers) != 2 {
		t.Errorf("followers %v, want the two other brokers", first.Followers)
	}
	acked := map[string]time.Time{}
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	g.clients(20, stop, &wg, acked, &mu)
	var failovers []time.Duration
	epoch := first.Epoch
	for k := range kills {
		time.Sleep(1500 * time.Millisecond) // let it dispatch
		i, l := g.leader("", 30*time.Second)
		p := g.proc(i)
		queued, err := g.st.List(context.Background(), bridge.Filter{States: []bridge.JobState{bridge.Queued}})
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		p.cmd.Process.Signal(syscall.SIGKILL)
		var queuedAtKill []string
		for _, j := range queued {
			if jj, err := g.st.Get(context.Background(), j.ID); err == nil && jj.State == bridge.Queued {
				queuedAtKill = append(queuedAtKill, j.ID)
			}
		}
		<-p.done
		p.cmd.ProcessState = &os.ProcessState{} // reaped: no cleanup kill
		_, nl := g.leader(l.Broker, 60*time.Second)
		if nl.Epoch <= epoch {
			t.Errorf("kill %d: new leader %s has epoch %d, not above %d", k+1, nl.Leader, nl.Epoch, epoch)
		}
		epoch = nl.Epoch
		g.start(i) // back as a follower
		// The first dispatch by the new leader: a job queued at the kill,
		// or acknowledged after it, that is no longer queued.
		var took time.Duration
		for deadline := time.Now().Add(60 * time.Second); took == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			mu.Lock()
			var watch []string
			for id, at := range acked {
				if at.After(killed) {
					watch = append(watch, id)
				}
			}
			mu.Unlock()
			watch = append(watch, queuedAtKill...)
			for _, id := range watch {
				if j, err := g.st.Get(context.Background(), id); err == nil && j.State != bridge.Queued {
					took = time.Since(killed)
					break
				}
			}
		}
		if took == 0 {
			for j := range g.socks {
				logs := g.proc(j).logs.String()
				t.Logf("broker %d log tail:\n%s", j, logs[max(0, len(logs)-4000):])
			}
			t.Fatalf("kill %d: nothing acknowledged after it was dispatched within 60 s", k+1)
		}
		failovers = append(failovers, took)
		t.Logf("kill %d: %s killed, %s leads (epoch %d), first dispatch after %s", k+1, l.Broker, nl.Leader, nl.Epoch, took.Round(time.Millisecond))
	}
	close(stop)
	wg.Wait()
	slices.Sort(failovers)
	med, worst := failovers[len(failovers)/2], failovers[len(failovers)-1]
	fmt.Printf("shared store failover: %d kills, %d jobs acknowledged, failover median %s max %s\n", kills, len(acked), med.Round(time.Millisecond), worst.Round(time.Millisecond))
	g.checkOnce(acked, 3*time.Minute)
	if os.Getenv("GRIDSUB_LONG") != "" && worst >= 10*time.Second {
		t.Errorf("failover max %s, want under 10 s", worst)
	}
}

// TestSharedStoreStoppedLeader: the leader is SIGSTOPped while a follower
// takes over, then SIGCONTed: it writes nothing (its writes are fenced),
// steps down with a "stepped_down" event and exits; every acknowledged job
// ran exactly once.
func TestSharedStoreStoppedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, two SSH sites and two brokers")
	}
	g := newSharedGrid(t, 2, 2*time.Second)
	i, l := g.leader("", 30*time.Second)
	// gridsub status without an id, asked of the follower, and /metrics.
	t.Setenv(envSocket, g.socks[1-i])
	code, stdout, stderr := cli("status", "-o", "json")
	var ls daemon.Leadership
	if err := json.Unmarshal([]byte(stdout), &ls); err != nil || code != 0 || ls.Role != "follower" || ls.Leader != l.Broker || ls.Epoch != l.Epoch {
		t.Fatalf("gridsub status on the follower: exit %d %v %+v\n%s", code, err, ls, stderr)
	}
	if code, stdout, _ := cli("status"); code != 0 || !strings.Contains(stdout, "leader       "+l.Broker) || !strings.Contains(stdout, "epoch        1") {
		t.Errorf("gridsub status text: exit %d\n%s", code, stdout)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", g.socks[i])
	}}}
	if resp, err := hc.Get("http://gridsub/metrics"); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`gridsub_leader{broker="` + l.Broker + `"} 1`, "gridsub_leader_epoch 1", "gridsub_followers 1"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
	acked := map[string]time.Time{}
	// A keyed submission sent twice to the follower is one job.
	fc := api.NewUnixClient(g.socks[1-i])
	kr := bridge.Request{Name: "keyed", Script: "#!/bin/sh\ntrue\n", Nodes: 1, Estimate: time.Minute, IdempotencyKey: "ha-key-1"}
	j1, err1 := fc.Submit(context.Background(), kr)
	j2, err2 := fc.Submit(context.Background(), kr)
	if err1 != nil || err2 != nil || j1.ID != j2.ID {
		t.Fatalf("a keyed submission sent twice to a follower: %v %v, ids %v %v", err1, err2, j1, j2)
	}
	acked[j1.ID] = time.Now()

	// A follower hands a hold, a release and a cancel to the leader: a job
	// waiting for a long one is held and released, the long one cancelled,
	// each asked of the follower.
	ctx := context.Background()
	long, err := fc.Submit(ctx, bridge.Request{Name: "long", Nodes: 1, Estimate: 20 * time.Minute, Script: "#!/bin/sh\nsleep 600\n"})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := fc.Submit(ctx, bridge.Request{Name: "after-long", Nodes: 1, Estimate: time.Minute, Script: "#!/bin/sh\ntrue\n", AfterOK: []string{long.ID}})
	if err != nil {
		t.Fatal(err)
	}
	until := func(what string, ok func(j *bridge.Job) bool, id string) {
		t.Helper()
		var j *bridge.Job
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if j, err = fc.Job(ctx, id); err == nil && ok(j) {
				return
			}
		}
		t.Fatalf("asked of the follower: %s of %s never happened: %+v %v", what, id, j, err)
	}
	until("taken by the leader", func(j *bridge.Job) bool { return j.State == bridge.Held }, dep.ID)
	if _, err := fc.Control(ctx, dep.ID, "hold"); err != nil {
		t.Fatalf("hold through the follower: %v", err)
	}
	until("the hold", func(j *bridge.Job) bool { return j.UserHold }, dep.ID)
	if _, err := fc.Control(ctx, dep.ID, "release"); err != nil {
		t.Fatalf("release through the follower: %v", err)
	}
	until("the release", func(j *bridge.Job) bool { return !j.UserHold }, dep.ID)
	if _, err := fc.Cancel(ctx, long.ID); err != nil {
		t.Fatalf("cancel through the follower: %v", err)
	}
	until("the cancel", func(j *bridge.Job) bool { return j.State == bridge.Cancelled }, long.ID)
	if _, err := fc.Cancel(ctx, long.ID); !errors.Is(err, bridge.ErrFinal) && (err == nil || !strings.Contains(err.Error(), "ended")) {
		t.Errorf("cancelling an ended job through the follower: %v, want it refused as ended", err)
	}
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	g.clients(10, stop, &wg, acked, &mu)
	time.Sleep(2 * time.Second)
	p := g.proc(i)
	p.cmd.Process.Signal(syscall.SIGSTOP)
	_, nl := g.leader(l.Broker, 60*time.Second)
	t.Logf("%s stopped; %s leads (epoch %d, was %d)", l.Broker, nl.Leader, nl.Epoch, l.Epoch)
	time.Sleep(3 * time.Second) // the new leader dispatches meanwhile
	p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case err := <-p.done:
		p.cmd.ProcessState = &os.ProcessState{}
		if err == nil {
			t.Errorf("the former leader exited with status 0, want 3 (stepped down)")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the former leader did not step down within 30 s of SIGCONT\n%s", p.logs)
	}
	if logs := p.logs.String(); !strings.Contains(logs, `"event":"stepped_down"`) || !strings.Contains(logs, "stepped down") {
		t.Errorf("the former leader's log has no stepped_down event:\n%s", logs[max(0, len(logs)-3000):])
	}
	close(stop)
	wg.Wait()
	g.checkOnce(acked, 3*time.Minute)
	t.Logf("%d jobs acknowledged, each ran once", len(acked))
}
