//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
)

func TestSIGKILLMidRun(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gridsub-localsite")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/plugins/localsite/cmd/gridsub-localsite").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, _ := os.ReadFile(bin)
	sum := sha256.Sum256(b)
	root, marks := t.TempDir(), t.TempDir()
	ctx := context.Background()
	var mu sync.Mutex
	var events []string
	sv, err := plugins.Supervise(ctx, plugins.BackendSpec{Path: bin, SHA256: hex.EncodeToString(sum[:]),
		Config: plugins.BackendConfig{Name: "ws", Kind: "local", Nodes: 4, CoresPerNode: 1, RemoteDir: root}},
		plugins.SuperviseOptions{PingInterval: 100 * time.Millisecond, Backoff: 100 * time.Millisecond,
			OnEvent: func(site, kind, detail string) { mu.Lock(); events = append(events, kind); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	const N = 200
	ids := map[string]backends.JobID{}
	killed := false
	for i := 0; i < N; i++ {
		g := fmt.Sprintf("k%d", i)
		spec := &backends.JobSpec{GridID: g, Nodes: 1, Walltime: time.Minute,
			Script: fmt.Sprintf("echo run >> %s\nsleep 0.0%d\nexit 0\n", filepath.Join(marks, g), i%10)}
		if i == N/3 && !killed {
			pid := sv.Instance().Pid
			syscall.Kill(pid, syscall.SIGKILL)
			killed = true
			t.Logf("SIGKILLed plugin pid %d after %d submissions", pid, i)
		}
		for attempt := 0; ; attempt++ {
			id, err := sv.Submit(ctx, spec)
			if err == nil {
				ids[g] = id
				break
			}
			if !backends.Retryable(err) || attempt > 50 {
				t.Fatalf("submit %s: %v", g, err)
			}
			// as the broker: look the tag up before submitting again
			if found, ferr := sv.FindByGridID(ctx, g); ferr == nil && len(found) > 0 {
				ids[g] = found[0].ID
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	end := time.Now().Add(2 * time.Minute)
	for {
		var list []backends.JobID
		for _, id := range ids {
			list = append(list, id)
		}
		sts, err := sv.Status(ctx, list)
		done := 0
		if err == nil {
			for _, st := range sts {
				if st.State.Final() {
					if st.State != backends.StateCompleted {
						t.Fatalf("job %s: %+v", st.ID, st)
					}
					done++
				}
			}
		} else if !errors.Is(err, backends.ErrUnavailable) {
			t.Fatal(err)
		}
		if done == N {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d done", done, N)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; i < N; i++ {
		bb, _ := os.ReadFile(filepath.Join(marks, fmt.Sprintf("k%d", i)))
		if c := strings.Count(string(bb), "run"); c != 1 {
			t.Errorf("job k%d ran %d times", i, c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) == 0 {
		t.Error("no plugin-restarted event")
	}
	t.Logf("events %v, health %+v", events, sv.Health())
}
