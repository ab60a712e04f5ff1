package bridge

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
)

// The live repetitive mapping on the real SLURM testbed (two sites, real
// slurmctld/slurmd, sshd on loopback; scripts/slurm-testbed.sh). Skipped
// without the testbed's environment.

func realRemapSite(t *testing.T, name string) *slurm.Backend {
	t.Helper()
	return realSlurmSite(t, name, "")
}

// remapPartition is the partition the remap tests send siteA's jobs to: the
// testbed's "debug" partition holds two of siteA's nodes, so one foreign job
// can hold it whole (see occupy).
const remapPartition = "debug"

// realSlurmSite connects to a testbed site, submitting into partition ("" =
// the site's default).
func realSlurmSite(t *testing.T, name, partition string) *slurm.Backend {
	t.Helper()
	key := os.Getenv("GRIDSUB_SSH_KEY")
	up := strings.ToUpper(name)
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_" + up + "_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no SLURM testbed: source /var/tmp/gridsub-local-testbed/testbed.env (scripts/slurm-testbed.sh start)")
	}
	ssh := transport.Config{Host: os.Getenv("GRIDSUB_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_SSH_USER"),
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")}, MaxSessions: 8}
	b, err := slurm.Connect(context.Background(), slurm.Config{Name: name, Partition: partition, RemoteDir: os.Getenv("GRIDSUB_" + up + "_SCRATCH"), Budget: quickBudget}, ssh)
	if err != nil {
		t.Fatalf("connecting to %s: %v", name, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// occupy holds the whole of a site's partition with one foreign job (one
// this broker does not know) of the given time limit and waits until it
// runs. Once it runs no other job of the testbed can free a node there, so a
// job sent to the partition waits behind it whatever else the suite runs at
// the site meanwhile (other packages' tests share the testbed).
func occupy(t *testing.T, s *slurm.Backend, tag string, limit time.Duration) backends.JobID {
	t.Helper()
	ctx := context.Background()
	in, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Submit(ctx, &backends.JobSpec{GridID: tag, Name: "remap-occupier", Command: []string{"sleep", "3600"},
		Nodes: in.Nodes, Walltime: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Cancel(context.Background(), id) })
	waitRemote(t, s, id, backends.StateRunning, 3*time.Minute)
	// The site's capacity as the broker reads it is the backend's last
	// answer: asked now, it is the held partition.
	if in, err := s.Info(ctx); err != nil || in.FreeNodes != 0 {
		t.Fatalf("%s held by %s, yet %d node(s) free (%v)", s.Name(), id, in.FreeNodes, err)
	}
	return id
}

func waitRemote(t *testing.T, s *slurm.Backend, id backends.JobID, want backends.State, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		sts, err := s.Status(context.Background(), []backends.JobID{id})
		if err == nil && sts[0].State == want {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s job %s: want %s, got %v %v", s.Name(), id, want, sts, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// tagged lists the remote jobs of a tag at a site, as "state".
func tagged(t *testing.T, s *slurm.Backend, tag string) []backends.JobStatus {
	t.Helper()
	sts, err := s.FindByGridID(context.Background(), tag)
	if err != nil {
		t.Fatalf("%s: looking up %s: %v", s.Name(), tag, err)
	}
	return sts
}

// cycleUntil runs cycles (wall-clock now) until cond holds or d passes.
func cycleUntil(t *testing.T, b *Broker, d time.Duration, cond func() bool) bool {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if _, err := b.Cycle(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
		if cond() {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

// TestRealSlurmRemap: a job queued at siteA behind a long job is moved to
// siteB once siteB frees up, runs there exactly once, and siteA's queue no
// longer holds it — plainly, and with the broker stopped (by the crash
// hook) after the submission at siteB, before its outcome was recorded:
// after Recover the job is adopted there, nothing lost or duplicated.
func TestRealSlurmRemap(t *testing.T) {
	a, bs := realSlurmSite(t, "siteA", remapPartition), realRemapSite(t, "siteB")
	prefix := fmt.Sprintf("rm%d", time.Now().UnixNano()%1_000_000_000)
	// siteA is held by a long job for the whole test: a job sent there waits.
	occupy(t, a, prefix+"-occA", 30*time.Minute)
	// (The kill between the withdrawal and the submission is a real
	// SIGKILL in remap_kill_test.go.)
	for _, point := range []string{"", crashAfterSubmit} {
		name := point
		if name == "" {
			name = "no-crash"
		}
		t.Run(name, func(t *testing.T) {
			store := NewMemStore()
			opts := Options{Sites: []SiteConfig{{Name: "siteA", Backend: a, H: 1}, {Name: "siteB", Backend: bs, H: 1}},
				Planner: scriptPlanner{onSite(0)}, Remap: &RemapOptions{MinGain: time.Minute}, Store: store,
				SubmitGrace: 10 * time.Second, IDPrefix: prefix + strings.ReplaceAll(name, "-", "")}
			b, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			occB := occupy(t, bs, opts.IDPrefix+"-occB", 30*time.Minute)
			r := Request{Name: "remap", Command: []string{"hostname"}, Nodes: 1, Estimate: 2 * time.Minute}
			j, err := b.Submit(context.Background(), r, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			mustCycle(t, b, time.Now())
			old, moved := RemoteTag(j.ID, 1), RemoteTag(j.ID, 2)
			if got := mustJob(t, b, j.ID); got.State != Dispatched || got.Sites() != "siteA:1" {
				t.Fatalf("setup: %s at %s\n%s", got.State, got.Sites(), eventsOf(got))
			}
			// siteB is busy too: nothing to gain, the job stays.
			mustCycle(t, b, time.Now())
			if got := mustJob(t, b, j.ID); got.Sites() != "siteA:1" || got.Moves != 0 {
				t.Fatalf("siteB busy: the job must stay at siteA, got %s\n%s", got.Sites(), eventsOf(got))
			}
			if err := bs.Cancel(context.Background(), occB); err != nil {
				t.Fatal(err)
			}
			if point != "" {
				b.rm.hook = func(p, id string) bool { return p == point && id == j.ID }
			}
			if !cycleUntil(t, b, 20*time.Second, func() bool { return b.rm.crashed || mustJob(t, b, j.ID).Moves > 0 }) {
				t.Fatalf("never moved once siteB freed up\n%s", eventsOf(mustJob(t, b, j.ID)))
			}
			if point != "" {
				// Killed here: what the sites hold is what the process left.
				for _, st := range tagged(t, a, old) {
					if !st.State.Final() {
						t.Fatalf("crash %s: siteA still holds %s as %s", point, old, st.State)
					}
				}
				b, err = New(opts)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.Recover(context.Background(), time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			if !cycleUntil(t, b, 30*time.Second, func() bool { return mustJob(t, b, j.ID).State.Final() }) {
				t.Fatalf("never ended\n%s", eventsOf(mustJob(t, b, j.ID)))
			}
			got := mustJob(t, b, j.ID)
			if got.State != Completed || got.Sites() != "siteB:1" {
				t.Fatalf("want completed at siteB, got %s at %s\n%s", got.State, got.Sites(), eventsOf(got))
			}
			if !hasEvent(got, EventMoved, "moved from siteA (predicted start ") || !hasEvent(got, EventMoved, "to siteB (start now): gain ") {
				t.Fatalf("no moved event in the user's words\n%s", eventsOf(got))
			}
			// siteA: the first attempt, withdrawn before it ran; siteB: the
			// second, run once; neither site has the other's tag.
			atA, atB := tagged(t, a, old), tagged(t, bs, moved)
			if len(atA) != 1 || atA[0].State != backends.StateCancelled || len(atB) != 1 || atB[0].State != backends.StateCompleted {
				t.Fatalf("remote jobs: siteA %s %+v, siteB %s %+v; want one cancelled at siteA and one completed at siteB", old, atA, moved, atB)
			}
			if n := len(tagged(t, a, moved)) + len(tagged(t, bs, old)); n != 0 {
				t.Fatalf("%d remote jobs of the wrong attempt at a site", n)
			}
			t.Logf("%s: %s", name, eventsOf(got))
		})
	}
}
