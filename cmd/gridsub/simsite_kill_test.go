package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/simbackend/sshsite"
)

// TestSimsiteSIGKILLExactlyOnce is the daemon kill test on sites that
// outlive the daemon: `gridsub serve` drives SSH-served simulated sites of
// both dialects (served by this test process) while it is SIGKILLed at
// random moments and restarted on the same state; jobs keep being
// submitted and keep running (and ending) at the sites while it is dead.
// At the end every acknowledged job is there and completed, and every job
// the daemon knows ran exactly once at the sites (counted by the sites:
// job processes started per grid tag, over all attempts), nothing else
// ran. Bounded: 40 jobs, 3 kills; GRIDSUB_LONG=1: 1,000 jobs, 20 kills
// (GRIDSUB_SIMSITE_KILL_JOBS / _KILLS override).
//
// It found a defect of the broker's recovery (docs/simsite.md, "Kill
// test"): a job whose submit command was still in flight at the SIGKILL
// was not found at recovery, re-dispatched, and then ran twice (about one
// bounded run in three; 2-5 jobs per 1,000). Recovery now looks such a tag
// up again until the intent is bridge.Options.SubmitGrace old. A
// co-allocated job runs once per component, each at its own site, under
// one tag (checkExactlyOnce counts per component).
func TestSimsiteSIGKILLExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and kills it")
	}
	jobs, kills, span := 40, 3, 3*time.Second
	if os.Getenv("GRIDSUB_LONG") == "1" {
		jobs, kills, span = 1000, 20, 40*time.Second
	}
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_SIMSITE_KILL_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	if v, err := strconv.Atoi(os.Getenv("GRIDSUB_SIMSITE_KILL_KILLS")); err == nil && v >= 0 {
		kills = v
	}
	bin := buildBinary(t)
	t.Parallel() // mostly waiting on the daemon's cycles
	cfg, sites := simGrid(t, []int{8, 8, 4, 4}, []string{sshsite.SLURM, sshsite.PBS, sshsite.SLURM, sshsite.PBS}, "greedy-easy")
	d := t.TempDir()
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))

	var mu sync.Mutex
	acked := map[string]bool{}
	var p *serveProc
	pMu := sync.Mutex{}
	restart := func() {
		pMu.Lock()
		p = startServe(t, bin, state, sock, "--config", cfg)
		pMu.Unlock()
	}
	restart()
	t0 := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the submitter: one job every span/jobs, dropped when the daemon is down
		c := api.NewUnixClient(sock)
		for i := 0; i < jobs; i++ {
			time.Sleep(span / time.Duration(jobs))
			// Each job runs 0.3 s at its site: many end while the daemon is dead.
			j, err := c.Submit(ctx, bridge.Request{Name: fmt.Sprintf("k%d", i),
				Command: []string{"/bin/sh", "-c", "sleep 0.3"}, Nodes: 1 + i%2, Estimate: time.Minute})
			if err != nil {
				i-- // not acknowledged: try again (a fresh job) once the daemon is back
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			mu.Lock()
			if acked[j.ID] {
				t.Errorf("id %s acknowledged twice", j.ID)
			}
			acked[j.ID] = true
			mu.Unlock()
		}
	})
	for k := range kills {
		time.Sleep(time.Duration(rng.Int64N(int64(span)/int64(kills+1))) + 200*time.Millisecond)
		pMu.Lock()
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.done
		pMu.Unlock()
		time.Sleep(time.Duration(rng.Int64N(int64(500 * time.Millisecond)))) // dead for a while: jobs end at the sites
		restart()
		t.Logf("kill %d at %s", k+1, time.Since(t0).Round(time.Millisecond))
	}
	wg.Wait()
	close(stop)
	c := api.NewUnixClient(sock)
	deadline := time.Now().Add(2*time.Minute + time.Duration(jobs)*50*time.Millisecond)
	var all []*bridge.Job
	for {
		var err error
		if all, err = c.ListAll(ctx, bridge.Filter{Limit: api.MaxLimit}); err != nil {
			t.Fatal(err)
		}
		final := 0
		for _, j := range all {
			if j.State.Final() {
				final++
			}
		}
		if final == len(all) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs final after the kills: %s", final, len(all), statesString(countStates(all)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	pMu.Lock()
	p.term(t, sock)
	pMu.Unlock()
	known := map[string]bool{}
	for _, j := range all {
		known[j.ID] = true
		if j.State != bridge.Completed {
			t.Errorf("job %s is %s: %s", j.ID, j.State, j.Reason)
		}
	}
	lost := 0
	for id := range acked {
		if !known[id] {
			lost++
			t.Errorf("acknowledged job %s is gone", id)
		}
	}
	checkExactlyOnce(t, sites, all)
	t.Logf("kill test on simulated SSH sites: %d kills, %d acknowledged jobs, %d known to the daemon, %d lost, all completed and run exactly once: %v (%s)",
		kills, len(acked), len(all), lost, !t.Failed(), time.Since(t0).Round(time.Millisecond))
}
