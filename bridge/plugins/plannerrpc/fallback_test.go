package plannerrpc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// restartable is a primary that fails with ErrPluginExited until it is
// restarted, fails times times.
type restartable struct {
	policy.Planner
	mu       sync.Mutex
	broken   bool
	restarts int
	failErr  error // when set, Plan fails with it (broken or not)
}

func (r *restartable) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	r.mu.Lock()
	broken, ferr := r.broken, r.failErr
	r.mu.Unlock()
	if ferr != nil {
		return nil, ferr
	}
	if broken {
		return nil, fmt.Errorf("%w: planner mock: Plan", ErrPluginExited)
	}
	return r.Planner.Plan(ctx, s)
}

func (r *restartable) Restart(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarts++
	r.broken = false
	return nil
}

type recorder struct {
	mu  sync.Mutex
	got []*SwitchError
}

func (r *recorder) on(err error) {
	var se *SwitchError
	if !errors.As(err, &se) {
		panic(fmt.Sprintf("OnSwitch got a %T", err))
	}
	r.mu.Lock()
	r.got = append(r.got, se)
	r.mu.Unlock()
}

// TestFallbackRestarts: a primary that crashed is restarted and asked
// again; the plan is its own, the restart is reported, no fallback.
func TestFallbackRestarts(t *testing.T) {
	s := randSnapshot(rand.New(rand.NewPCG(9, 9)), 3, 20)
	prim := &restartable{Planner: builtin(t, "greedy-easy"), broken: true}
	var rec recorder
	fb := WithFallback(prim, &mockPlanner{name: "never", plan: func(context.Context, *policy.Snapshot) (*policy.Plan, error) {
		t.Fatal("the fallback planned though the restart cured the primary")
		return nil, nil
	}}, rec.on)
	got, err := fb.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := builtin(t, "greedy-easy").Plan(context.Background(), s)
	samePlan(t, "after a restart", want, got)
	if prim.restarts != 1 || len(rec.got) != 1 || !rec.got[0].Restarted || !errors.Is(rec.got[0], ErrPluginExited) {
		t.Fatalf("%d restarts, reports %v; want one restart, reported with the crash", prim.restarts, rec.got)
	}
}

// TestFallbackSwitches: a primary whose planner fails (a RemoteError: a
// restart would not help) is not restarted; the fallback plans from then
// on, the switch is reported once, and the primary is not asked again.
// Without a fallback the primary's error is returned after MaxRestarts.
func TestFallbackSwitches(t *testing.T) {
	s := randSnapshot(rand.New(rand.NewPCG(10, 10)), 3, 20)
	prim := &restartable{Planner: builtin(t, "greedy-easy"), failErr: &RemoteError{Plugin: "p", Method: "Plan", Msg: "diverged"}}
	var rec recorder
	fb := WithFallback(prim, builtin(t, "single-site-easy"), rec.on)
	want, _ := builtin(t, "single-site-easy").Plan(context.Background(), s)
	for range 3 {
		got, err := fb.Plan(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		samePlan(t, "fallback", want, got)
	}
	if prim.restarts != 0 || len(rec.got) != 1 || rec.got[0].Restarted || rec.got[0].To != "single-site-easy" {
		t.Fatalf("%d restarts, reports %v; want no restart and one switch to single-site-easy", prim.restarts, rec.got)
	}
	if fb.Name() != prim.Name() {
		t.Fatalf("Name() = %q, want the primary's", fb.Name())
	}

	// No fallback: restarts (each reported), then the error.
	prim = &restartable{Planner: builtin(t, "greedy-easy"), failErr: fmt.Errorf("%w: gone", ErrPluginExited)}
	rec = recorder{}
	only := (&Fallback{Primary: prim, OnSwitch: rec.on, MaxRestarts: 2}).Planner()
	if _, err := only.Plan(context.Background(), s); !errors.Is(err, ErrPluginExited) {
		t.Fatalf("err = %v, want the primary's ErrPluginExited", err)
	}
	if prim.restarts != 2 || len(rec.got) != 2 {
		t.Fatalf("%d restarts, %d reports; want 2 and 2", prim.restarts, len(rec.got))
	}

	// The caller's ctx ending is not the primary failing.
	prim = &restartable{Planner: builtin(t, "greedy-easy"), broken: true}
	fb = WithFallback(prim, builtin(t, "single-site-easy"), rec.on)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fb.Plan(ctx, s); err != context.Canceled || prim.restarts != 0 {
		t.Fatalf("cancelled: err = %v, %d restarts; want context.Canceled and none", err, prim.restarts)
	}
}

// TestFallbackHungPrimary: a primary that does not answer within
// CallTimeout is a failure: the fallback plans.
func TestFallbackHungPrimary(t *testing.T) {
	s := randSnapshot(rand.New(rand.NewPCG(11, 11)), 3, 20)
	hung := &mockPlanner{name: "hung", plan: func(ctx context.Context, _ *policy.Snapshot) (*policy.Plan, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	p, _ := dial(t, hung)
	var rec recorder
	fb := (&Fallback{Primary: p, Fallback: builtin(t, "greedy-easy"), OnSwitch: rec.on, CallTimeout: 100 * time.Millisecond}).Planner()
	got, err := fb.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := builtin(t, "greedy-easy").Plan(context.Background(), s)
	samePlan(t, "fallback after a hang", want, got)
	if len(rec.got) != 1 || !errors.Is(rec.got[0], context.DeadlineExceeded) {
		t.Fatalf("reports %v, want one switch for the deadline", rec.got)
	}
}

// TestFallbackSessionTakesOver: a plugin that dies in the middle of a
// session is replaced by the fallback, seeded from the session's mirror:
// the passes go on planning exactly what an uninterrupted session plans,
// with an Incremental fallback and with a plain one.
func TestFallbackSessionTakesOver(t *testing.T) {
	const name = "greedy-conservative"
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			r := rand.New(rand.NewPCG(12, 12))
			s := randSnapshot(r, 4, 25)
			s.Quiet = true
			p, srv := dial(t, builtin(t, name))
			var fallback policy.Planner = builtin(t, name)
			if plain {
				fallback = struct{ policy.Planner }{fallback}
			}
			var rec recorder
			fb := WithFallback(p, fallback, rec.on)
			got, err := fb.(policy.Incremental).NewSession(s)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := builtin(t, name).(policy.Incremental).NewSession(s)
			passes, _ := drive(t, name, r, s, want, got, 200, func(step int) {
				if step > 60 {
					srv.Stop() // the plugin dies
				}
			})
			if len(rec.got) != 1 || rec.got[0].Restarted || !errors.Is(rec.got[0], ErrPluginExited) {
				t.Fatalf("reports %v, want one switch for the plugin's exit", rec.got)
			}
			fs := got.(*fallbackSession)
			if fs.prim != nil || (fs.fb == nil) == !plain {
				t.Fatalf("after the switch: prim %v, fallback session %v (plain fallback %v)", fs.prim, fs.fb, plain)
			}
			t.Logf("%d passes", passes)
		})
	}
}

// failingRestart is a crashed primary whose restart fails.
type failingRestart struct{ restartable }

func (*failingRestart) Restart(context.Context) error { return errors.New("exec: no such file") }

// TestFallbackRestartFailedIsNotASwitch: a restart that fails is reported
// as such (RestartFailed), then the switch (neither flag), even when the
// primary and the fallback have the same name (a plugin serving
// greedy-easy falling back to the built-in greedy-easy): a host tells them
// apart by the flags, never by the names.
func TestFallbackRestartFailedIsNotASwitch(t *testing.T) {
	s := randSnapshot(rand.New(rand.NewPCG(3, 1)), 3, 20)
	prim := &failingRestart{restartable{Planner: builtin(t, "greedy-easy"), broken: true}}
	var rec recorder
	fb := WithFallback(prim, builtin(t, "greedy-easy"), rec.on)
	got, err := fb.Plan(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := builtin(t, "greedy-easy").Plan(context.Background(), s)
	samePlan(t, "by the fallback", want, got)
	if len(rec.got) != 2 {
		t.Fatalf("reports %v; want a failed restart, then the switch", rec.got)
	}
	r, sw := rec.got[0], rec.got[1]
	if !r.RestartFailed || r.Restarted || !errors.Is(r, ErrPluginExited) {
		t.Errorf("first report %+v; want RestartFailed with the crash", r)
	}
	if sw.RestartFailed || sw.Restarted || sw.From != sw.To {
		t.Errorf("second report %+v; want the switch (same names here)", sw)
	}
}

// TestFallbackRestartWindow: with a RestartWindow only the restarts within
// it count: a primary crashing now and then is restarted again and again;
// one crashing MaxRestarts+1 times within the window is replaced.
func TestFallbackRestartWindow(t *testing.T) {
	s := randSnapshot(rand.New(rand.NewPCG(5, 2)), 3, 20)
	crash := func(p *restartable) {
		p.mu.Lock()
		p.broken = true
		p.mu.Unlock()
	}
	// Now and then: 6 crashes, each after the window of the last restart.
	prim := &restartable{Planner: builtin(t, "greedy-easy")}
	var rec recorder
	f := &Fallback{Primary: prim, Fallback: builtin(t, "greedy-none"), OnSwitch: rec.on, MaxRestarts: 2, RestartWindow: 30 * time.Millisecond}
	pl := f.Planner()
	for i := 0; i < 6; i++ {
		crash(prim)
		if _, err := pl.Plan(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	if prim.restarts != 6 || f.isDown() || len(rec.got) != 6 {
		t.Fatalf("crashing now and then: %d restarts, down %v, %d reports; want 6 restarts and no switch", prim.restarts, f.isDown(), len(rec.got))
	}
	// In a burst: the third crash within the window switches.
	prim = &restartable{Planner: builtin(t, "greedy-easy")}
	rec = recorder{}
	f = &Fallback{Primary: prim, Fallback: builtin(t, "greedy-none"), OnSwitch: rec.on, MaxRestarts: 2, RestartWindow: time.Hour}
	pl = f.Planner()
	for i := 0; i < 3; i++ {
		crash(prim)
		if _, err := pl.Plan(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if prim.restarts != 2 || !f.isDown() || len(rec.got) != 3 || !rec.got[2].isSwitch() {
		t.Fatalf("a burst: %d restarts, down %v, reports %v; want 2 restarts, then the switch", prim.restarts, f.isDown(), rec.got)
	}
}

func (e *SwitchError) isSwitch() bool { return !e.Restarted && !e.RestartFailed }
