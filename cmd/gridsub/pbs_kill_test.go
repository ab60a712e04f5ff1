package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestRealPBSAdoptsAfterSIGKILL: a `gridsub serve` daemon on the real
// OpenPBS testbed is SIGKILLed while its PBS job runs; the job finishes
// while the daemon is dead; the restarted daemon adopts that PBS job
// (same id, same attempt) and completes it instead of submitting it again:
// exactly one PBS job ever carries the job's tag.
func TestRealPBSAdoptsAfterSIGKILL(t *testing.T) {
	needPBS(t)
	if testing.Short() {
		t.Skip("builds and kills the daemon")
	}
	bin := buildBinary(t)
	d, err := os.MkdirTemp("", "gspbs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	env := func(k string) string { return os.Getenv("GRIDSUB_PBS_" + k) }
	bin0 := env("BIN")
	if bin0 == "" {
		bin0 = pbs.DefaultBinDir
	}
	// startServe drops GRIDSUB_* from the daemon's environment: the
	// configuration gets the testbed's values written out.
	remote := fmt.Sprintf("%s/killtest-pbs-%d", env("HOME_DIR"), time.Now().UnixNano())
	cfg := fmt.Sprintf(`sites:
  - name: pbs
    kind: pbs
    nodes: 1
    cores_per_node: 2
    remote_dir: %s
    bin_dir: %s
    ssh: {host: %s, port: %s, user: %s, key_file: %s, known_hosts: %s, max_sessions: 4}
broker: {interval: 1s, poll_interval: 1s}
`, remote, bin0, env("SSH_HOST"), env("SSH_PORT"), env("SSH_USER"), env("SSH_KEY"), env("SSH_KNOWN_HOSTS"))
	cfgPath := filepath.Join(d, "pbs.yaml")
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
			t.Fatalf("job not running at PBS after a minute: %+v\n%s", j, p.logs)
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
	// The PBS job ends while no daemon watches it.
	port, _ := strconv.Atoi(env("SSH_PORT"))
	tc, err := transport.Dial(ctx, transport.Config{Host: env("SSH_HOST"), Port: port, User: env("SSH_USER"),
		KeyFiles: []string{env("SSH_KEY")}, KnownHosts: []string{env("SSH_KNOWN_HOSTS")}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	b := pbs.New(pbs.Config{Name: "pbs", RemoteDir: remote, User: env("SSH_USER"), BinDir: bin0}, tc, nil)
	for {
		st, err := b.Status(ctx, []backends.JobID{remoteID})
		if err != nil {
			t.Fatal(err)
		}
		if st[0].State.Final() {
			if st[0].State != backends.StateCompleted {
				t.Fatalf("PBS job %s: %+v", remoteID, st[0])
			}
			break
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("PBS job %s still %s", remoteID, st[0].State)
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
		t.Fatalf("after the restart: attempts %d (was %d), components %+v; want PBS job %s adopted", j.Attempts, attempts, j.Comps, remoteID)
	}
	found, err := b.FindByGridID(ctx, bridge.RemoteTag(j.ID, attempts))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].ID != remoteID {
		t.Fatalf("PBS jobs tagged %s: %+v; want exactly %s (submitted once)", bridge.RemoteTag(j.ID, attempts), found, remoteID)
	}
	t.Logf("PBS job %s submitted before the SIGKILL, finished while the daemon was dead, adopted after the restart", remoteID)
	p.term(t, sock)
	_, _ = tc.Run(ctx, []string{"rm", "-rf", "--", remote}, nil)
}
