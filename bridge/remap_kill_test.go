package bridge_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/policy"
)

// TestRealSlurmRemapSIGKILL: a real SIGKILL in the middle of a move, on
// the real SLURM testbed. A child process (this test binary) runs the
// broker on a SQLite store, holds at the crash point (between the
// withdrawal at siteA and the new attempt's intent; with GRIDSUB_LONG=1
// also after the intent, before the submission) and is killed there with
// SIGKILL; a second child recovers from the same store and runs the job
// to its end. The parent checks at the sites that the job ran once, at
// siteB, and that siteA holds only its withdrawn first attempt.

const envRemapChild = "GRIDSUB_REMAP_KILL_CHILD" // "<point>|<state dir>|<id prefix>" in a child

// onA places every job at siteA (a planner that thought it best): the job
// waits there while siteA is busy.
type onA struct{}

func (onA) Name() string { return "on-siteA" }
func (onA) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	p := &policy.Plan{}
	for _, j := range s.Queue {
		p.Decisions = append(p.Decisions, policy.Decision{Job: j.ID, Action: policy.Start,
			Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: j.Width}}}})
	}
	return p, nil
}

// killSite connects to a testbed site; siteA's jobs go to the partition the
// remap tests hold whole (bridge.RemapPartition).
func killSite(t testing.TB, name string) *slurm.Backend {
	partition := ""
	if name == "siteA" {
		partition = bridge.RemapPartition
	}
	key := os.Getenv("GRIDSUB_SSH_KEY")
	up := strings.ToUpper(name)
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_" + up + "_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no SLURM testbed: source /var/tmp/gridsub-local-testbed/testbed.env (scripts/slurm-testbed.sh start)")
	}
	ssh := transport.Config{Host: os.Getenv("GRIDSUB_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_SSH_USER"),
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")}, MaxSessions: 8}
	b, err := slurm.Connect(context.Background(), slurm.Config{Name: name, Partition: partition, RemoteDir: os.Getenv("GRIDSUB_" + up + "_SCRATCH"), Budget: sshbatch.BudgetConfig{PerMinute: 600, Burst: 60, PollFast: time.Second, PollSlow: time.Second,
		CapacityEvery: 2 * time.Second, BackoffMax: 4 * time.Second}}, ssh)
	if err != nil {
		t.Fatalf("connecting to %s: %v", name, err)
	}
	return b
}

// remapChild is the broker process: it submits one job (first run) or
// recovers (second run), then cycles every 300 ms, saying on stdout what
// happens; with a point it blocks at that crash point of the move.
func remapChild(t *testing.T, spec string) {
	parts := strings.SplitN(spec, "|", 3)
	point, dir, prefix := parts[0], parts[1], parts[2]
	ctx := context.Background()
	a, b := killSite(t, "siteA"), killSite(t, "siteB")
	st, err := store.Open(ctx, filepath.Join(dir, "state.db"), store.Options{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	br, err := bridge.New(bridge.Options{Sites: []bridge.SiteConfig{{Name: "siteA", Backend: a, H: 1}, {Name: "siteB", Backend: b, H: 1}},
		Planner: onA{}, Store: st, IDPrefix: prefix, SubmitGrace: 3 * time.Second, Remap: &bridge.RemapOptions{MinGain: time.Minute}})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	var id string
	if point != "" {
		bridge.SetRemapHook(br, func(p, _ string) bool {
			if p == point {
				fmt.Println("AT", p)
				select {} // held here until the parent's SIGKILL
			}
			return false
		})
		j, err := br.Submit(ctx, bridge.Request{Name: "remap-kill", Command: []string{"hostname"}, Nodes: 1, Estimate: 2 * time.Minute}, time.Now())
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		id = j.ID
		fmt.Println("JOB", id)
	} else {
		if _, err := br.Recover(ctx, time.Now()); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		jobs := br.Jobs()
		if len(jobs) != 1 {
			fmt.Println("ERROR recovered", len(jobs), "jobs")
			os.Exit(1)
		}
		id = jobs[0].ID
	}
	said := ""
	for end := time.Now().Add(40 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		if _, err := br.Cycle(ctx, time.Now()); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		j, _ := br.Job(id)
		if s := string(j.State) + " " + j.Sites(); s != said {
			fmt.Println("STATE", s)
			said = s
		}
		if j.State.Final() {
			var ev []string
			for _, e := range j.Events {
				ev = append(ev, e.Kind+": "+e.Msg)
			}
			fmt.Println("EVENTS", strings.Join(ev, " || "))
			os.Exit(0)
		}
	}
	fmt.Println("ERROR the job never ended")
	os.Exit(1)
}

func TestRealSlurmRemapSIGKILL(t *testing.T) {
	if spec := os.Getenv(envRemapChild); spec != "" {
		remapChild(t, spec)
		return
	}
	a, b := killSite(t, "siteA"), killSite(t, "siteB")
	defer a.Close()
	defer b.Close()
	for _, point := range []string{bridge.CrashAfterWithdraw, bridge.CrashBeforeSubmit} {
		t.Run(point, func(t *testing.T) {
			if point != bridge.CrashAfterWithdraw && os.Getenv("GRIDSUB_LONG") == "" {
				t.Skip("GRIDSUB_LONG=1: the kill after the new attempt's intent was stored (about 11 s); the suite kills between the withdrawal and the intent")
			}
			dir := t.TempDir()
			prefix := fmt.Sprintf("rk%d%s", time.Now().UnixNano()%1_000_000_000, strings.ReplaceAll(point, "-", ""))
			bridge.Occupy(t, a, prefix+"-occA", 30*time.Minute)
			occB := bridge.Occupy(t, b, prefix+"-occB", 30*time.Minute)

			child := func(spec string) (*exec.Cmd, *bufio.Scanner) {
				cmd := exec.Command(os.Args[0], "-test.run=^TestRealSlurmRemapSIGKILL$")
				cmd.Env = append(os.Environ(), envRemapChild+"="+spec)
				cmd.Stderr = os.Stderr
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				return cmd, bufio.NewScanner(out)
			}
			expect := func(sc *bufio.Scanner, prefix string) string {
				for sc.Scan() {
					l := sc.Text()
					t.Logf("child: %s", l)
					if strings.HasPrefix(l, "ERROR") {
						t.Fatal(l)
					}
					if strings.HasPrefix(l, prefix) {
						return strings.TrimSpace(strings.TrimPrefix(l, prefix))
					}
				}
				t.Fatalf("the child ended before saying %q", prefix)
				return ""
			}
			cmd, sc := child(point + "|" + dir + "|" + prefix)
			id := expect(sc, "JOB ")
			if s := expect(sc, "STATE "); s != "dispatched siteA:1" {
				t.Fatalf("setup: %s, want dispatched at siteA", s)
			}
			if err := b.Cancel(context.Background(), occB); err != nil { // siteB frees up
				t.Fatal(err)
			}
			expect(sc, "AT "+point)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			old, moved := bridge.RemoteTag(id, 1), bridge.RemoteTag(id, 2)
			for _, st := range find(t, a, old) {
				if !st.State.Final() {
					t.Fatalf("killed at %s: siteA still holds %s as %s", point, old, st.State)
				}
			}
			if n := len(find(t, b, moved)); n != 0 {
				t.Fatalf("killed at %s: siteB already holds %d job(s) of %s", point, n, moved)
			}
			_, sc = child("|" + dir + "|" + prefix)
			state := ""
			for {
				s := expect(sc, "")
				if strings.HasPrefix(s, "STATE ") {
					state = strings.TrimPrefix(s, "STATE ")
				}
				if strings.HasPrefix(s, "EVENTS ") {
					break
				}
			}
			if state != "completed siteB:1" {
				t.Fatalf("after the restart: %s, want completed at siteB", state)
			}
			// Exactly one run: one completed job at siteB under some
			// attempt, none anywhere else; siteA holds only the withdrawn
			// first attempt.
			ran := 0
			for k := 1; k <= 4; k++ {
				tag := bridge.RemoteTag(id, k)
				for _, s := range []*slurm.Backend{a, b} {
					for _, st := range find(t, s, tag) {
						switch {
						case st.State == backends.StateCompleted:
							ran++
						case st.State != backends.StateCancelled:
							t.Errorf("%s at %s is %s", tag, s.Name(), st.State)
						}
					}
				}
			}
			if ran != 1 {
				t.Fatalf("the job ran %d times, want once", ran)
			}
			if atA := find(t, a, old); len(atA) != 1 || atA[0].State != backends.StateCancelled {
				t.Fatalf("siteA: %+v, want the first attempt withdrawn", atA)
			}
		})
	}
}

func find(t *testing.T, s *slurm.Backend, tag string) []backends.JobStatus {
	t.Helper()
	sts, err := s.FindByGridID(context.Background(), tag)
	if err != nil {
		t.Fatal(err)
	}
	return sts
}
