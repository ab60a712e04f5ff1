package sshbatchtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// Site is one real batch site for the shared cases.
type Site struct {
	Name   string            // for messages
	Client *transport.Client // raw commands at the login node (and the backends' Stager)
	// Root is the backends' remote directory, a local path.
	Root string
	// New builds a fresh backend of the site's dialect on run, rooted at
	// Root, staging through Client.
	New func(run backends.Runner) *sshbatch.Backend
	// GridID returns a grid id no other job uses, starting with prefix.
	GridID func(prefix string) string
	// Harness carries the dialect's conformance values (JobTimeout,
	// TimeoutWall, NamesReported, UnknownID); Conformance fills the rest.
	Harness backendtest.Harness
	// UnknownResv is a reservation the site does not have, in the
	// dialect's form: a job naming it is refused by the batch system.
	UnknownResv string
	// PollJobs live jobs are polled with exactly one PollCommand (the
	// dialect's Command name of the status command).
	PollJobs    int
	PollCommand string
	// LiveOutput: a running job's stdout is in its job directory while it
	// runs (else it arrives when the job ends, as on PBS).
	LiveOutput bool
}

// Run runs the shared cases one after the other on s.
func Run(t *testing.T, s Site) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Site)
	}{
		{"Conformance", Conformance}, {"StatusOneCommandPerPoll", StatusOneCommandPerPoll},
		{"DataHolder", DataHolder}, {"ReadLog", ReadLog}, {"BatchPartialFailure", BatchPartialFailure},
		{"BatchCut", BatchCut}, {"BatchJobsRun", BatchJobsRun},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
}

// Conformance runs backendtest's suite on a backend of s, in parallel
// cases with real sleeps, staging and reservations.
func Conformance(t *testing.T, s Site) {
	h := s.Harness
	h.Backend = s.New(s.Client)
	h.GridID = func() string { return s.GridID("ct") }
	h.Wait = func(ctx context.Context, d time.Duration) { time.Sleep(d) }
	h.Poll = 500 * time.Millisecond
	h.Parallel, h.Walltime, h.Staging, h.Reservations = true, true, true, true
	h.RemoteExists = func(ctx context.Context, p string) (bool, error) {
		r, err := s.Client.Run(ctx, []string{"test", "-e", p}, nil)
		return err == nil && r.ExitCode == 0, err
	}
	backendtest.Run(t, h)
}

// Counter is a Runner that counts the commands it runs by Name(argv)
// (the dialect's name for a command: Exec.Command).
type Counter struct {
	backends.Runner
	Name func(argv []string) string
	mu   sync.Mutex
	n    map[string]int
}

func (s Site) counter() *Counter {
	return &Counter{Runner: s.Client, Name: s.New(s.Client).Exec().Command}
}

// Run counts argv and runs it.
func (c *Counter) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[c.Name(argv)]++
	c.mu.Unlock()
	return c.Runner.Run(ctx, argv, stdin)
}

// Reset returns the counts since the last Reset and starts again.
func (c *Counter) Reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// pendingResv makes a one-node reservation that starts in an hour: jobs
// submitted into it stay pending and cost the site nothing. At the end the
// jobs of ids() are cancelled and the reservation deleted.
func pendingResv(t *testing.T, s Site, b *sshbatch.Backend, ids func() []backends.JobID) backends.ResvID {
	t.Helper()
	resv, err := b.CreateReservation(context.Background(), &backends.ReservationSpec{Name: "r-" + s.GridID("resv"),
		Start: time.Now().Add(time.Hour), Duration: 10 * time.Minute, Nodes: 1})
	if err != nil {
		t.Fatalf("CreateReservation: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		sem := make(chan struct{}, 6)
		var wg sync.WaitGroup
		for _, id := range ids() {
			if id == "" {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := b.Cancel(ctx, id); err != nil {
					t.Logf("Cancel %s: %v", id, err)
				}
			}()
		}
		wg.Wait()
		time.Sleep(500 * time.Millisecond)
		if err := b.DeleteReservation(ctx, resv); err != nil {
			t.Logf("DeleteReservation: %v", err)
		}
	})
	return resv
}

// waitFinal polls until every job of ids has ended.
func waitFinal(t *testing.T, b *sshbatch.Backend, ids []backends.JobID, within time.Duration) []backends.JobStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := b.Status(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, x := range st {
			if x.State.Final() {
				done++
			}
		}
		if done == len(ids) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %+v", within, st)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// StatusOneCommandPerPoll: tracking s.PollJobs live jobs costs exactly one
// status command (and nothing else) per poll.
func StatusOneCommandPerPoll(t *testing.T, s Site) {
	cnt := s.counter()
	b := s.New(cnt)
	ctx := context.Background()
	ids := make([]backends.JobID, s.PollJobs)
	resv := pendingResv(t, s, b, func() []backends.JobID { return ids })
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	sem := make(chan struct{}, 6)
	t0 := time.Now()
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			id, err := b.Submit(ctx, &backends.JobSpec{GridID: s.GridID("track"), Nodes: 1, CoresPerNode: 1,
				Walltime: time.Minute, Command: []string{"true"}, Env: map[string]string{"N": fmt.Sprint(i)},
				Reservation: string(resv)})
			ids[i] = id
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
	}
	t.Logf("%s: submitted %d jobs over one SSH connection (6 at a time) in %s", s.Name, len(ids), time.Since(t0).Round(time.Millisecond))
	cnt.Reset()
	for poll := 0; poll < 3; poll++ {
		t1 := time.Now()
		st, err := b.Status(ctx, ids)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if calls := cnt.Reset(); calls[s.PollCommand] != 1 || len(calls) != 1 {
			t.Fatalf("poll %d of %d jobs ran %v, want exactly one %s", poll, len(ids), calls, s.PollCommand)
		}
		for i, x := range st {
			if x.ID != ids[i] || x.State != backends.StatePending || x.GridID == "" {
				t.Fatalf("poll %d: entry %d = %+v for id %s, want pending with its grid id", poll, i, x, ids[i])
			}
		}
		t.Logf("poll %d: %d jobs in one %s, %s", poll, len(ids), s.PollCommand, time.Since(t1).Round(time.Millisecond))
	}
}

// PendingSpecs returns n one-node jobs of `true`, each with its own grid id
// (gridID(prefix)), in reservation resv: on a reservation that starts
// later, they stay pending and cost the site nothing.
func PendingSpecs(gridID func(string) string, prefix string, n int, resv backends.ResvID) []*backends.JobSpec {
	specs := make([]*backends.JobSpec, n)
	for i := range specs {
		specs[i] = &backends.JobSpec{GridID: gridID(prefix), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute,
			Command: []string{"true"}, Reservation: string(resv)}
	}
	return specs
}

// SeedFiles adds every file the globs match (but READMEs and directories)
// as a seed of f, and fails when there are fewer than min: the fuzz
// targets of a dialect's parsers start from its captured outputs.
func SeedFiles(f *testing.F, min int, globs ...string) {
	f.Helper()
	n := 0
	for _, g := range globs {
		files, err := filepath.Glob(g)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range files {
			if fi, err := os.Stat(p); err != nil || fi.IsDir() || filepath.Base(p) == "README.md" {
				continue
			}
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			n++
		}
	}
	if n < min {
		f.Fatalf("%d captured outputs match %q, want at least %d", n, globs, min)
	}
}
