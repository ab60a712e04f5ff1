package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/examples/plugins/gridengine"
	"github.com/gridsub/gridsub/examples/plugins/gridengine/gelock"
)

// These tests run gridsub against the real Grid Engine of
// scripts/sge-testbed.sh through the Grid Engine backend built as an
// external plugin (examples/plugins/gridengine/cmd/gridsub-gridengine),
// named in the configuration by path and checksum as a centre would.

// needGE skips unless the Grid Engine testbed's environment is loaded.
func needGE(t *testing.T) {
	t.Helper()
	if os.Getenv("GRIDSUB_GE_SSH_KEY") == "" || os.Getenv("GRIDSUB_GE_SSH_PORT") == "" {
		t.Skip("no Grid Engine testbed: run `bash scripts/sge-testbed.sh start && source /var/tmp/gridsub-ge/testbed.env` (scripts/test.sh does both)")
	}
	gelock.Hold(t)
}

var (
	gePluginOnce       sync.Once
	gePluginBin, geSum string
	gePluginErr        error
)

// gePlugin builds the Grid Engine plugin once and returns its path and
// SHA-256.
func gePlugin(t *testing.T) (string, string) {
	t.Helper()
	gePluginOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gsge")
		if err != nil {
			gePluginErr = err
			return
		}
		gePluginBin = filepath.Join(dir, "gridsub-gridengine")
		cmd := exec.Command("go", "build", "-o", gePluginBin, "./examples/plugins/gridengine/cmd/gridsub-gridengine")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			gePluginErr = fmt.Errorf("%v\n%s", err, out)
			return
		}
		b, err := os.ReadFile(gePluginBin)
		if err != nil {
			gePluginErr = err
			return
		}
		sum := sha256.Sum256(b)
		geSum = hex.EncodeToString(sum[:])
	})
	if gePluginErr != nil {
		t.Fatal(gePluginErr)
	}
	return gePluginBin, geSum
}

func geEnv(k string) string { return os.Getenv("GRIDSUB_GE_" + k) }

// geSite is the Grid Engine site's configuration: every slot of the
// testbed's queue a node, the plugin by path and checksum.
func geSite(t *testing.T, remote string) string {
	bin, sum := gePlugin(t)
	return fmt.Sprintf(`  - name: ge
    kind: gridengine
    nodes: %s
    cores_per_node: 1
    h: 1.0
    partition: %s
    remote_dir: %s
    ssh: {host: %s, port: %s, user: %s, key_file: %s, known_hosts: %s, max_sessions: 8}
    plugin:
      path: %s
      sha256: "%s"
      options: {pe: %s}
`, geEnv("SLOTS"), geEnv("QUEUE"), remote, geEnv("SSH_HOST"), geEnv("SSH_PORT"), geEnv("SSH_USER"), geEnv("SSH_KEY"),
		geEnv("SSH_KNOWN_HOSTS"), bin, sum, geEnv("PE"))
}

// geConfig writes a configuration with the Grid Engine site (and more
// sites' YAML, if any) and returns its path.
func geConfig(t *testing.T, more string) string {
	t.Helper()
	remote := fmt.Sprintf("%s/gridsub-cli-%d", geEnv("HOME_DIR"), time.Now().UnixNano())
	cfg := "sites:\n" + geSite(t, remote) + more + `network:
  default: {bandwidth: 10MB/s, latency: 50ms}
  multi_site_factor: 1.1
broker:
  policy: optimal-easy
  interval: 1s
`
	p := filepath.Join(t.TempDir(), "ge.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := geDial(); err == nil {
			_, _ = c.Run(context.Background(), []string{"rm", "-rf", "--", remote}, nil)
			c.Close()
		}
	})
	return p
}

func geDial() (*transport.Client, error) {
	port, _ := strconv.Atoi(geEnv("SSH_PORT"))
	return transport.Dial(context.Background(), transport.Config{Host: geEnv("SSH_HOST"), Port: port, User: geEnv("SSH_USER"),
		KeyFiles: []string{geEnv("SSH_KEY")}, KnownHosts: []string{geEnv("SSH_KNOWN_HOSTS")}})
}

// runGE runs a job file through gridsub with configuration cfg and
// returns its JSON summary and progress.
func runGE(t *testing.T, cfg, job string) (jobJSON, string) {
	t.Helper()
	code, stdout, stderr := gridsub(t, "--config", cfg, job, "--output", "json", "--out-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var j jobJSON
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	return j, stderr
}

// TestRealGridEngineStagesInAndOut runs examples/staging.yaml on the real
// Grid Engine through the plugin: inputs go up over SFTP, qsub runs the
// job, and the result file and the logs/ directory come back.
func TestRealGridEngineStagesInAndOut(t *testing.T) {
	needGE(t)
	j, stderr := runGE(t, geConfig(t, ""), "examples/staging.yaml")
	if j.State != "completed" || len(j.Sites) != 1 || j.Sites[0].Site != "ge" {
		t.Fatalf("%+v\n%s", j, stderr)
	}
	if !strings.Contains(stderr, "placement: ge") {
		t.Fatalf("stderr does not say where it ran:\n%s", stderr)
	}
	var result, log string
	for _, p := range j.Outputs {
		b, _ := os.ReadFile(p)
		switch filepath.Base(p) {
		case "result.txt":
			result = string(b)
		case "solve.log":
			log = string(b)
		}
	}
	if !strings.HasPrefix(result, "iterations=") || !strings.Contains(result, "sum=") || !strings.Contains(log, "solved on") {
		t.Fatalf("result.txt = %q, logs/solve.log = %q (outputs %v)", result, log, j.Outputs)
	}
}

// TestRealGridEngineRunsInItsReservation: a job with a reservation window
// gets a native qrsub advance reservation, runs inside it (qacct records
// the job's arid), and the reservation is deleted afterwards (qrstat no
// longer knows it).
func TestRealGridEngineRunsInItsReservation(t *testing.T) {
	needGE(t)
	job := writeJob(t, t.TempDir(), "resv.yaml", `name: ge-resv
command: ["/bin/sh", "-c", "echo ran in $QUEUE"]
resources: {nodes: 2, walltime: 2m}
scheduling:
  reservation: {earliest_start: +35s, latest_end: +6m}
`)
	j, stderr := runGE(t, geConfig(t, ""), job)
	r := j.Resv
	if j.State != "completed" || r == nil || r.State != "released" || r.Native == "" || j.Start == nil || j.Start.Before(r.Earliest) || len(j.Sites) != 1 {
		t.Fatalf("job %+v, reservation %+v; want completed inside a released reservation\n%s", j, r, stderr)
	}
	for _, e := range j.Events {
		if e.Kind == "release-failed" {
			t.Fatalf("deleting the reservation failed: %s", e.Msg)
		}
	}
	if !strings.Contains(stderr, "reservation bound: ge") {
		t.Fatalf("progress does not say where it was bound:\n%s", stderr)
	}
	c, err := geDial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	res, err := c.Run(ctx, []string{"qacct", "-j", j.Sites[0].RemoteID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := gridengine.ParseQacct(res.Stdout, time.Local)
	if err != nil || len(recs) != 1 || recs[0].Arid != r.Native {
		t.Fatalf("qacct -j %s: %+v, %v; want the job in advance reservation %s\n%s", j.Sites[0].RemoteID, recs, err, r.Native, res.Stdout)
	}
	res, err = c.Run(ctx, []string{"qrstat", "-ar", r.Native, "-xml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ars, unknown, err := gridengine.ParseQrstat(res.Stdout, time.Local); err != nil || len(ars) != 0 || len(unknown) != 1 {
		t.Fatalf("qrstat -ar %s after the job: %+v %v %v; want it deleted\n%s", r.Native, ars, unknown, err, res.Stdout)
	}
}

// TestRealGridEngineCoAllocatesWithSlurm: a job wider than the Grid Engine
// site and the SLURM testbed's siteA is split across both, each part
// running under its own batch system, and completes.
func TestRealGridEngineCoAllocatesWithSlurm(t *testing.T) {
	needGE(t)
	needSlurm(t)
	nodes, _ := strconv.Atoi(geEnv("SLOTS"))
	slurmNodes := len(strings.Fields(os.Getenv("GRIDSUB_SITEA_NODES")))
	if nodes < 1 || slurmNodes < 2 {
		t.Skipf("Grid Engine has %d slots and siteA %d nodes: too few to span", nodes, slurmNodes)
	}
	slurm := fmt.Sprintf(`  - name: siteA
    kind: slurm
    nodes: %d
    cores_per_node: %s
    h: 1.0
    partition: batch
    remote_dir: %s
    ssh: {host: %s, port: %s, user: %s, key_file: %s, known_hosts: %s, max_sessions: 8}
`, slurmNodes, os.Getenv("GRIDSUB_SITEA_CPUS_PER_NODE"), os.Getenv("GRIDSUB_SITEA_SCRATCH"), os.Getenv("GRIDSUB_SSH_HOST"),
		os.Getenv("GRIDSUB_SITEA_SSH_PORT"), os.Getenv("GRIDSUB_SSH_USER"), os.Getenv("GRIDSUB_SSH_KEY"), os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS"))
	want := nodes + slurmNodes/2 // wider than either site
	job := writeJob(t, t.TempDir(), "wide.yaml", fmt.Sprintf(`name: ge-wide
script: |
  echo "part $GRIDSUB_COMPONENT of $GRIDSUB_COMPONENTS under ${SLURM_CLUSTER_NAME:+SLURM}${SGE_CELL:+Grid Engine}"
resources: {nodes: %d, walltime: 3m}
`, want))
	j, stderr := runGE(t, geConfig(t, slurm), job)
	total, sites := 0, map[string]bool{}
	for _, s := range j.Sites {
		total += s.Nodes
		sites[s.Site] = true
	}
	if j.State != "completed" || !sites["ge"] || !sites["siteA"] || total != want {
		t.Fatalf("%+v; want %d nodes completed across ge and siteA\n%s", j, want, stderr)
	}
	said := map[string]bool{}
	for _, p := range j.Outputs {
		if filepath.Base(p) != "gridsub.out" {
			continue
		}
		b, _ := os.ReadFile(p)
		switch {
		case strings.Contains(string(b), "of 2 under Grid Engine"):
			said["ge"] = true
		case strings.Contains(string(b), "of 2 under SLURM"):
			said["slurm"] = true
		}
	}
	if !said["ge"] || !said["slurm"] {
		t.Fatalf("parts said %v; want one under each batch system (outputs %v)", said, j.Outputs)
	}
}

// TestRealGridEngineAdoptsAfterSIGKILL: a `gridsub serve` daemon is
// SIGKILLed while its Grid Engine job runs; the job finishes while the
// daemon is dead; the restarted daemon (with a new plugin process) adopts
// that job (same id, same attempt) and completes it instead of submitting
// it again: exactly one Grid Engine job ever carries the job's tag.
func TestRealGridEngineAdoptsAfterSIGKILL(t *testing.T) {
	needGE(t)
	if testing.Short() {
		t.Skip("builds and kills the daemon")
	}
	bin := buildBinary(t)
	d, err := os.MkdirTemp("", "gsge")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	remote := fmt.Sprintf("%s/killtest-ge-%d", geEnv("HOME_DIR"), time.Now().UnixNano())
	cfg := "sites:\n" + geSite(t, remote) + "broker: {interval: 1s, poll_interval: 1s}\n"
	cfgPath := filepath.Join(d, "ge.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := startServe(t, bin, state, sock, "--config", cfgPath)
	c := api.NewUnixClient(sock)
	j, err := c.Submit(ctx, bridge.Request{Name: "adopt", Command: []string{"/bin/sh", "-c", "sleep 12; echo ran once"}, Nodes: 1, Estimate: 2 * time.Minute})
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, p.logs)
	}
	var remoteID backends.JobID
	var attempts int
	deadline := time.Now().Add(time.Minute)
	for remoteID == "" || j.State != bridge.Running {
		if time.Now().After(deadline) {
			t.Fatalf("job not running at Grid Engine after a minute: %+v\n%s", j, p.logs)
		}
		time.Sleep(200 * time.Millisecond)
		if j, err = c.Job(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if len(j.Comps) == 1 {
			remoteID, attempts = j.Comps[0].RemoteID, j.Attempts
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	// The Grid Engine job ends while no daemon watches it.
	tc, err := geDial()
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	b := gridengine.New(gridengine.Config{Name: "ge", Queue: geEnv("QUEUE"), PE: geEnv("PE"), RemoteDir: remote, User: geEnv("SSH_USER")}, tc, nil)
	for {
		st, err := b.Status(ctx, []backends.JobID{remoteID})
		if err != nil {
			t.Fatal(err)
		}
		if st[0].State.Final() {
			if st[0].State != backends.StateCompleted {
				t.Fatalf("Grid Engine job %s: %+v", remoteID, st[0])
			}
			break
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("Grid Engine job %s still %s", remoteID, st[0].State)
		}
		time.Sleep(time.Second)
	}
	p = startServe(t, bin, state, sock, "--config", cfgPath)
	c = api.NewUnixClient(sock)
	deadline = time.Now().Add(time.Minute)
	for j.State != bridge.Completed {
		if j.State.Final() || time.Now().After(deadline) {
			t.Fatalf("after the restart: %+v\n%s", j, p.logs)
		}
		time.Sleep(200 * time.Millisecond)
		if j, err = c.Job(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	if j.Attempts != attempts || len(j.Comps) != 1 || j.Comps[0].RemoteID != remoteID {
		t.Fatalf("after the restart: attempts %d (was %d), components %+v; want Grid Engine job %s adopted", j.Attempts, attempts, j.Comps, remoteID)
	}
	found, err := b.FindByGridID(ctx, bridge.RemoteTag(j.ID, attempts))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].ID != remoteID {
		t.Fatalf("Grid Engine jobs tagged %s: %+v; want exactly %s (submitted once)", bridge.RemoteTag(j.ID, attempts), found, remoteID)
	}
	t.Logf("Grid Engine job %s submitted before the SIGKILL, finished while the daemon was dead, adopted after the restart", remoteID)
	p.term(t, sock)
	_, _ = tc.Run(ctx, []string{"rm", "-rf", "--", remote}, nil)
}
