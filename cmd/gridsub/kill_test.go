package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestSIGKILLKeepsAcknowledgedJobs: clients submit while the daemon is
// killed with SIGKILL three times; after each restart on the same state
// directory (over the stale socket) every submission that was answered is
// there, once, under its name, and no id is handed out twice. This is the
// durability half of issue 5's kill test only: simulated sites die with
// the daemon, so exactly-once remote execution cannot be checked here (see
// docs/daemon.md).
func TestSIGKILLKeepsAcknowledgedJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the daemon")
	}
	bin := buildBinary(t)
	d, err := os.MkdirTemp("", "gsk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	ctx := context.Background()
	acked := map[string]string{} // id -> name
	var mu sync.Mutex
	for round := range 3 {
		p := startServe(t, bin, state, sock)
		c := api.NewUnixClient(sock)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					name := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					j, err := c.Submit(ctx, bridge.Request{Name: name, Command: []string{"/bin/true"}, Nodes: 1 + i%4, Estimate: time.Minute})
					if err != nil {
						return // the daemon died under the request: not acknowledged
					}
					mu.Lock()
					if prev, dup := acked[j.ID]; dup {
						t.Errorf("id %s handed out twice (%s, %s)", j.ID, prev, name)
					}
					acked[j.ID] = name
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(300+200*round) * time.Millisecond)
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.done
		close(stop)
		wg.Wait()
		if _, err := os.Lstat(sock); err != nil {
			t.Fatalf("round %d: a SIGKILLed daemon cannot remove its socket, yet it is gone: %v", round, err)
		}
	}
	p := startServe(t, bin, state, sock) // over the stale socket once more
	all, err := api.NewUnixClient(sock).ListAll(ctx, bridge.Filter{Limit: api.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, j := range all {
		if _, dup := listed[j.ID]; dup {
			t.Errorf("%s listed twice", j.ID)
		}
		listed[j.ID] = j.Req.Name
	}
	lost := 0
	for id, name := range acked {
		if listed[id] != name {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged %s (%s) is listed as %q after the kills", id, name, listed[id])
			}
		}
	}
	if len(acked) < 100 {
		t.Errorf("only %d submissions acknowledged in three rounds", len(acked))
	}
	t.Logf("3 SIGKILLs: %d acknowledged submissions, %d listed after restart (%d unacknowledged ones that committed), %d lost",
		len(acked), len(listed), len(listed)-len(acked)+lost, lost)
	p.term(t, sock)
}
