package store_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

const crashEnv = "GRIDSUB_STORE_CRASH_HELPER"

// crashHelper runs in a child process: 8 goroutines take a number, put a
// job under it and print "ok <id> <events>" once Put returned, until the
// parent kills the process.
func crashHelper(path string) {
	ctx := context.Background()
	s, err := store.Open(ctx, path, store.Options{IDBlock: 16})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				n, err := s.NextID(ctx)
				if err != nil {
					fmt.Println("nextid:", err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(out, "n %d\n", n)
				out.Flush()
				mu.Unlock()
				j := job(fmt.Sprintf("g%06d", n), "crash", bridge.Queued)
				for k := range int(n % 5) { // a few puts per job, events growing
					j.Events = append(j.Events, bridge.Event{Time: t0, Kind: "k", Msg: strconv.Itoa(k)})
					j.Attempts = k
					if err := s.Put(ctx, j); err != nil {
						fmt.Println("put:", err)
						os.Exit(5)
					}
				}
				if err := s.Put(ctx, j); err != nil {
					fmt.Println("put:", err)
					os.Exit(5)
				}
				mu.Lock()
				fmt.Fprintf(out, "ok %s %d\n", j.ID, len(j.Events))
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestMain(m *testing.M) {
	if p := os.Getenv(crashEnv); p != "" {
		crashHelper(p)
		os.Exit(0)
	}
	if p := os.Getenv(openEnv); p != "" {
		openHelper(p)
		os.Exit(0)
	}
	if p := os.Getenv(healthEnv); p != "" {
		fmt.Print(notWritableReport(p))
		os.Exit(0)
	}
	if p := os.Getenv(rssEnv); p != "" {
		rssHelper(p)
		os.Exit(0)
	}
	code := m.Run()
	if scaleDir != "" {
		os.RemoveAll(scaleDir)
	}
	os.Exit(code)
}

// A process killed with SIGKILL at random moments loses no job it was told
// was stored, and no number is handed out twice across the restarts.
func TestSIGKILLLosesNothingCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	rng := rand.New(rand.NewPCG(7, 11))
	acked := map[string]int{}    // id -> events acknowledged
	numbers := map[string]bool{} // every number NextID handed out
	for round := range 6 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := 20 + rng.IntN(200)
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "n" {
				if numbers[f[1]] {
					t.Fatalf("round %d: NextID handed out %s twice", round, f[1])
				}
				numbers[f[1]] = true
				continue
			}
			if len(f) != 3 || f[0] != "ok" {
				t.Fatalf("round %d: helper said %q", round, sc.Text())
			}
			acked[f[1]], _ = strconv.Atoi(f[2])
			if n++; n == killAt {
				cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
		cmd.Wait()
		if n < killAt {
			t.Fatalf("round %d: helper ended after %d jobs, before it was killed", round, n)
		}
	}
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatalf("open after the kills: %v", err)
	}
	defer s.Close()
	for id, nev := range acked {
		j, err := s.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("acknowledged job lost: %v", err)
		}
		if len(j.Events) != nev {
			t.Fatalf("%s: %d events, %d acknowledged", id, len(j.Events), nev)
		}
	}
	all := mustList(t, s, bridge.Filter{})
	t.Logf("%d numbers handed out, %d jobs acknowledged over 6 SIGKILLed runs, %d in the store (the rest were in flight at a kill)", len(numbers), len(acked), len(all))
}
