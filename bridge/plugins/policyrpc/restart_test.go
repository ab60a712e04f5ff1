package policyrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/reserve"
	"github.com/gridsub/gridsub/policy/trust"
)

// testPolicy builds internal/testpolicy and returns it and its sha256.
func testPolicy(t *testing.T) (string, string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testpolicy")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/testpolicy").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return bin, hex.EncodeToString(s[:])
}

func kill(t *testing.T, p *Plugin) {
	t.Helper()
	pid := p.Pid()
	if pid <= 0 {
		t.Fatal("no plugin process")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !p.Exited(); {
		if time.Now().After(deadline) {
			t.Fatal("the killed plugin did not exit")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRestartAfterKill: a plugin SIGKILLed between calls is restarted by
// the next call, which answers as if nothing happened; an admission book
// is rebuilt on the new process from its calls and stays equal to the
// book in process; a plugin that dies again at once is not restarted in
// a loop (ErrPluginExited).
func TestRestartAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a plugin")
	}
	bin, sum := testPolicy(t)
	ctx := context.Background()

	tp, err := Load(ctx, plugins.KindTrust, Config{Path: bin, Args: []string{"trust", "paper002"}, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	tr := tp.Policy().(policy.Trust)
	in := &policy.TrustInput{Sites: []policy.TrustNode{{Name: "A", Power: 4}, {Name: "B", Power: 2}},
		Outcomes: map[policy.TrustKey]policy.Outcomes{{To: "A"}: {Completed: 3, Failed: 1}}}
	want, _ := trust.Policy{Model: trust.DefaultModel()}.Scores(in)
	kill(t, tp)
	got, err := tr.Scores(in)
	if err != nil || !reflect.DeepEqual(got, want) || tp.Restarts() != 1 {
		t.Fatalf("after a kill: %v %v (restarts %d)", got, err, tp.Restarts())
	}
	kill(t, tp) // at once again: within MinRestartInterval
	if _, err := tr.Scores(in); !errors.Is(err, wire.ErrPluginExited) {
		t.Fatalf("a second death at once: %v", err)
	}
	if o := tr.Decay(policy.Outcomes{Failed: 2}, time.Hour, time.Hour); o.Failed != 2 || !errors.Is(tr.(interface{ Err() error }).Err(), wire.ErrPluginExited) {
		t.Fatalf("Decay on a dead plugin: %v", o)
	}
	time.Sleep(MinRestartInterval)
	if got, err := tr.Scores(in); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after the interval: %v %v", got, err)
	}

	ap, err := Load(ctx, plugins.KindAdmission, Config{Path: bin, Args: []string{"admission", "srrm-random"}, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	defer ap.Close()
	res := []policy.ResvResource{{Name: "a", Capacity: 2, Level: 1}, {Name: "b", Capacity: 2, Level: 1}, {Name: "c", Capacity: 1, Level: 2}}
	local, remote := reserve.SRRM{Mode: reserve.StaticRandom}.NewBook(res, 9), ap.Policy().(policy.Admission).NewBook(res, 9)
	t0 := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	step := func(k int) {
		q := policy.ResvRequest{ID: fmt.Sprintf("q%d", k), ET: t0.Add(time.Duration(k) * 10 * time.Minute), Dur: time.Hour, Width: 1, Demand: 1}
		q.LT = q.ET.Add(3 * time.Hour)
		if w, g := local.Admit(q, t0, nil), remote.Admit(q, t0, nil); !reflect.DeepEqual(w, g) {
			t.Fatalf("step %d: Admit %v, want %v", k, g, w)
		}
		if k%3 == 2 {
			id := fmt.Sprintf("q%d", k-1)
			wb, werr := local.Bind(id, t0, nil)
			gb, gerr := remote.Bind(id, t0, nil)
			if !reflect.DeepEqual(wb, gb) || (werr == nil) != (gerr == nil) || errors.Is(werr, policy.ErrResvBound) != errors.Is(gerr, policy.ErrResvBound) {
				t.Fatalf("step %d: Bind %+v %v, want %+v %v", k, gb, gerr, wb, werr)
			}
		}
		if w, g := local.Reservations(), remote.Reservations(); !reflect.DeepEqual(w, g) {
			t.Fatalf("step %d: reservations %v, want %v", k, g, w)
		}
	}
	for k := range 8 {
		step(k)
	}
	time.Sleep(MinRestartInterval)
	kill(t, ap)
	for k := 8; k < 16; k++ {
		step(k)
	}
	if ap.Restarts() != 1 {
		t.Errorf("restarts %d", ap.Restarts())
	}
}

// TestFallback: a plugin that fails for good — killed twice within
// MinRestartInterval, or hung past the call timeout even after a restart
// — is replaced by its fallback, which answers from then on; OnSwitch is
// told the restart and the switch; an admission book continues on the
// fallback's book rebuilt from its calls.
func TestFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a plugin")
	}
	bin, sum := testPolicy(t)
	ctx := context.Background()
	builtin := trust.Policy{Model: trust.DefaultModel()}
	in := &policy.TrustInput{Sites: []policy.TrustNode{{Name: "A", Power: 4}, {Name: "B", Power: 2}},
		Outcomes: map[policy.TrustKey]policy.Outcomes{{To: "A"}: {Completed: 3, Failed: 1}}}
	want, _ := builtin.Scores(in)

	var events []string
	hp, err := Load(ctx, plugins.KindTrust, Config{Path: bin, Args: []string{"trust", "hang"}, SHA256: sum, CallTimeout: 300 * time.Millisecond,
		Fallback: builtin, OnSwitch: func(err error) {
			var se *SwitchError
			if errors.As(err, &se) {
				events = append(events, fmt.Sprintf("restarted=%v to=%s deadline=%v", se.Restarted, se.To, errors.Is(err, context.DeadlineExceeded)))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer hp.Close()
	got, err := hp.Policy().(policy.Trust).Scores(in)
	if err != nil || !reflect.DeepEqual(got, want) || !hp.FallbackActive() {
		t.Fatalf("a hung plugin: %v %v (fallback active %v)", got, err, hp.FallbackActive())
	}
	if fmt.Sprint(events) != "[restarted=true to=hang deadline=true restarted=false to=paper002 deadline=true]" {
		t.Errorf("events %v", events)
	}
	if hp.Pid() != 0 {
		t.Errorf("the hung plugin still runs (pid %d)", hp.Pid())
	}

	if _, err := Load(ctx, plugins.KindTrust, Config{Path: bin, Args: []string{"trust", "paper002"}, Fallback: reserve.DRRM{}}); err == nil {
		t.Error("a fallback of another kind is accepted")
	}

	ap, err := Load(ctx, plugins.KindAdmission, Config{Path: bin, Args: []string{"admission", "drrm"}, SHA256: sum, Fallback: reserve.DRRM{}})
	if err != nil {
		t.Fatal(err)
	}
	defer ap.Close()
	res := []policy.ResvResource{{Name: "a", Capacity: 2, Level: 1}, {Name: "b", Capacity: 1, Level: 2}}
	local, remote := reserve.DRRM{}.NewBook(res, 1), ap.Policy().(policy.Admission).NewBook(res, 1)
	t0 := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	for k := range 12 {
		if k == 6 {
			kill(t, ap) // restarted at the next call ...
			remote.Reservations()
			kill(t, ap) // ... and dead again at once: the fallback takes the book over
		}
		q := policy.ResvRequest{ID: fmt.Sprintf("q%d", k), ET: t0.Add(time.Duration(k) * 20 * time.Minute), Dur: time.Hour, Width: 1, Demand: 1 + k%2}
		q.LT = q.ET.Add(2 * time.Hour)
		if w, g := local.Admit(q, t0, nil), remote.Admit(q, t0, nil); !reflect.DeepEqual(w, g) {
			t.Fatalf("step %d: Admit %v, want %v", k, g, w)
		}
		if w, g := local.Reservations(), remote.Reservations(); !reflect.DeepEqual(w, g) {
			t.Fatalf("step %d: reservations %v, want %v", k, g, w)
		}
	}
	if !ap.FallbackActive() || ap.Restarts() != 1 {
		t.Errorf("fallback active %v, restarts %d", ap.FallbackActive(), ap.Restarts())
	}
}

func TestListing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a plugin")
	}
	bin, sum := testPolicy(t)
	p, err := Load(context.Background(), plugins.KindRemap, Config{Path: bin, Args: []string{"remap", "gain"}, SHA256: sum, Fallback: mockRemap{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := p.Listing("broker.remap.policy", plugins.ModeExternal)
	if l.Kind != "remap" || l.Impl != bin || l.Version != "test" || l.SHA256 != sum || l.Pid <= 0 || l.Health != "ok" || l.Fallback != "mock-remap" {
		t.Errorf("listing %+v", l)
	}
	kill(t, p)
	if l := p.Listing("x", plugins.ModeExternal); l.Health != "down" || l.Pid != 0 {
		t.Errorf("after a kill: %+v", l)
	}
}
