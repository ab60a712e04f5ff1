package plannerrpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Restarter is a planner that can restart the process that runs it (the
// Planner of a Plugin from Load).
type Restarter interface {
	Restart(ctx context.Context) error
}

// SwitchError reports what a Fallback did about a failing primary: it
// restarted it (Restarted), tried to and could not (RestartFailed; the
// call fails or the fallback takes over next), or from now on plans with
// the fallback (neither). Err is the primary's failure. It is what
// OnSwitch gets, for an event and a metric. (From and To may be equal on
// a switch too: a plugin serving greedy-easy falling back to the built-in
// greedy-easy.)
type SwitchError struct {
	From, To      string // the planners' names (equal on a restart)
	Restarted     bool
	RestartFailed bool
	Err           error
}

func (e *SwitchError) Error() string {
	if e.Restarted {
		return fmt.Sprintf("planner %s failed and was restarted: %v", e.From, e.Err)
	}
	if e.RestartFailed {
		return fmt.Sprintf("planner %s failed and could not be restarted: %v", e.From, e.Err)
	}
	return fmt.Sprintf("planner %s failed, planning with %s from now on: %v", e.From, e.To, e.Err)
}

func (e *SwitchError) Unwrap() error { return e.Err }

// Fallback plans with Primary and, when it fails, restarts it (when it is
// a Restarter, at most MaxRestarts times) and tries again; when that does
// not help, it plans with Fallback from then on. The caller's own ctx
// ending is never a failure of the primary: it is returned as is.
//
// A session opened on a Fallback whose Primary is an Incremental follows
// the primary's session; on a switch, the fallback takes over from the
// session's mirror (a session of it when it is an Incremental, else one
// Plan per pass on the mirror), so the grid the fallback sees is exactly
// the one the primary saw.
type Fallback struct {
	Primary  policy.Planner
	Fallback policy.Planner // nil: after the restarts, the primary's error is returned
	// OnSwitch is told every restart and the switch (a *SwitchError).
	OnSwitch func(err error)
	// MaxRestarts bounds the restarts over the Fallback's life, or
	// within any RestartWindow when that is set (0: 3;
	// negative: none).
	MaxRestarts int
	// CallTimeout bounds each call to the primary, so that a hung plugin
	// is a failure rather than a stalled broker (0: 60 s; negative: only
	// the caller's ctx).
	CallTimeout time.Duration
	// RestartWindow, when > 0, counts only the restarts of the last
	// RestartWindow of wall time against MaxRestarts: a long-lived broker
	// restarts a plugin that crashes now and then, and falls back only
	// when it keeps crashing. 0: the whole life (a replay's run).
	RestartWindow time.Duration

	mu       sync.Mutex
	restarts int
	recent   []time.Time // restart times within RestartWindow
	down     bool        // the primary failed for good
}

// WithFallback is (&Fallback{Primary: primary, Fallback: fallback,
// OnSwitch: onFallback}).Planner().
func WithFallback(primary, fallback policy.Planner, onFallback func(err error)) policy.Planner {
	return (&Fallback{Primary: primary, Fallback: fallback, OnSwitch: onFallback}).Planner()
}

// Planner is f as a policy.Planner, and a policy.Incremental when the
// primary is one.
func (f *Fallback) Planner() policy.Planner {
	if _, ok := f.Primary.(policy.Incremental); ok {
		return fallbackIncremental{fallbackPlanner{f}}
	}
	return fallbackPlanner{f}
}

type fallbackPlanner struct{ f *Fallback }

func (p fallbackPlanner) Name() string { return p.f.Primary.Name() }

func (p fallbackPlanner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	f := p.f
	if !f.isDown() {
		plan, err := f.try(ctx, func(ctx context.Context) (*policy.Plan, error) { return f.Primary.Plan(ctx, s) })
		if err == nil || ctx.Err() != nil || !f.giveUp(err) {
			return plan, err
		}
	}
	return f.Fallback.Plan(ctx, s)
}

type fallbackIncremental struct{ fallbackPlanner }

func (p fallbackIncremental) NewSession(s *policy.Snapshot) (policy.Session, error) {
	f := p.f
	fs := &fallbackSession{f: f}
	if !f.isDown() {
		prim, err := f.Primary.(policy.Incremental).NewSession(s)
		if err == nil {
			fs.prim = prim
			if m, ok := prim.(interface{ Mirror() *policy.Snapshot }); ok {
				fs.primMirror = m
			} else {
				fs.own = &mirror{}
				fs.own.seed(s)
			}
			return fs, nil
		}
		if !f.giveUp(err) {
			return nil, err
		}
	}
	if err := fs.takeOver(s); err != nil {
		return nil, err
	}
	return fs, nil
}

func (f *Fallback) isDown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

func (f *Fallback) report(err error) {
	if f.OnSwitch != nil {
		f.OnSwitch(err)
	}
}

// giveUp marks the primary down after err and says whether the fallback
// takes over (false: there is none, return err).
func (f *Fallback) giveUp(err error) bool {
	if f.Fallback == nil {
		return false
	}
	f.mu.Lock()
	was := f.down
	f.down = true
	f.mu.Unlock()
	if !was {
		f.report(&SwitchError{From: f.Primary.Name(), To: f.Fallback.Name(), Err: err})
	}
	return true
}

// try calls the primary, restarting it and calling again after a failure
// a restart may cure (not an error the planner itself returned: a
// deterministic planner returns it again).
func (f *Fallback) try(ctx context.Context, call func(context.Context) (*policy.Plan, error)) (*policy.Plan, error) {
	for {
		plan, err := f.bounded(ctx, call)
		if err == nil {
			return plan, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !f.restart(ctx, err) {
			return nil, err
		}
	}
}

func (f *Fallback) bounded(ctx context.Context, call func(context.Context) (*policy.Plan, error)) (*policy.Plan, error) {
	d := f.CallTimeout
	if d == 0 {
		d = 60 * time.Second
	}
	if d < 0 {
		return call(ctx)
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return call(cctx)
}

// restart restarts the primary after err when it can and may, and says
// whether it did.
func (f *Fallback) restart(ctx context.Context, err error) bool {
	r, ok := f.Primary.(Restarter)
	var re *RemoteError
	if !ok || errors.As(err, &re) {
		return false
	}
	max := f.MaxRestarts
	if max == 0 {
		max = 3
	}
	f.mu.Lock()
	if f.RestartWindow > 0 {
		now := time.Now()
		f.recent = slices.DeleteFunc(f.recent, func(t time.Time) bool { return now.Sub(t) > f.RestartWindow })
		if len(f.recent) >= max {
			f.mu.Unlock()
			return false
		}
		f.recent = append(f.recent, now)
	} else if f.restarts >= max {
		f.mu.Unlock()
		return false
	}
	f.restarts++
	f.mu.Unlock()
	if rerr := r.Restart(ctx); rerr != nil {
		f.report(&SwitchError{From: f.Primary.Name(), To: f.Primary.Name(), RestartFailed: true, Err: errors.Join(err, fmt.Errorf("restart: %w", rerr))})
		return false
	}
	f.report(&SwitchError{From: f.Primary.Name(), To: f.Primary.Name(), Restarted: true, Err: err})
	return true
}

// fallbackSession is a Fallback's policy.Session.
type fallbackSession struct {
	f          *Fallback
	prim       policy.Session
	primMirror interface{ Mirror() *policy.Snapshot } // the primary keeps a mirror
	own        *mirror                                // else this one does, for a switch

	fb  policy.Session // after a switch, to an Incremental fallback
	fbm *mirror        // after a switch, to a plain fallback: the grid it plans on
}

// takeOver switches the session to the fallback, seeded with s.
func (fs *fallbackSession) takeOver(s *policy.Snapshot) error {
	fs.prim, fs.primMirror, fs.own = nil, nil, nil
	if inc, ok := fs.f.Fallback.(policy.Incremental); ok {
		ss, err := inc.NewSession(s)
		if err != nil {
			return fmt.Errorf("fallback %s: %w", fs.f.Fallback.Name(), err)
		}
		fs.fb = ss
		return nil
	}
	fs.fbm = &mirror{}
	fs.fbm.seed(s)
	return nil
}

func (fs *fallbackSession) Submit(j policy.Job) {
	switch {
	case fs.prim != nil:
		if fs.own != nil {
			fs.own.submit(j)
		}
		fs.prim.Submit(j)
	case fs.fb != nil:
		fs.fb.Submit(j)
	default:
		fs.fbm.submit(j)
	}
}

func (fs *fallbackSession) Hold(site, nodes int, until time.Time) error {
	switch {
	case fs.prim != nil:
		if fs.own != nil {
			if err := fs.own.hold(site, nodes, until); err != nil {
				return err
			}
		}
		return fs.prim.Hold(site, nodes, until)
	case fs.fb != nil:
		return fs.fb.Hold(site, nodes, until)
	default:
		return fs.fbm.hold(site, nodes, until)
	}
}

func (fs *fallbackSession) Release(site, nodes int, until time.Time) error {
	switch {
	case fs.prim != nil:
		if fs.own != nil {
			if err := fs.own.release(site, nodes, until); err != nil {
				return err
			}
		}
		return fs.prim.Release(site, nodes, until)
	case fs.fb != nil:
		return fs.fb.Release(site, nodes, until)
	default:
		return fs.fbm.release(site, nodes, until)
	}
}

func (fs *fallbackSession) Plan(ctx context.Context, now time.Time) (*policy.Plan, error) {
	if fs.prim != nil {
		plan, err := fs.f.try(ctx, func(ctx context.Context) (*policy.Plan, error) { return fs.prim.Plan(ctx, now) })
		if err == nil {
			if fs.own != nil {
				fs.own.planned(now, plan)
			}
			return plan, nil
		}
		if ctx.Err() != nil || !fs.f.giveUp(err) {
			return nil, err
		}
		var s *policy.Snapshot
		if fs.primMirror != nil {
			s = fs.primMirror.Mirror()
		} else {
			s = fs.own.snapshot()
		}
		if err := fs.takeOver(s); err != nil {
			return nil, err
		}
	} else if fs.fb == nil && fs.fbm == nil {
		return nil, ErrClosed
	}
	if fs.fb != nil {
		return fs.fb.Plan(ctx, now)
	}
	if now.Before(fs.fbm.snap.Now) {
		return nil, fmt.Errorf("plannerrpc: session: plan at %s, before the last pass (%s)", now.Format(time.RFC3339Nano), fs.fbm.snap.Now.Format(time.RFC3339Nano))
	}
	s := fs.fbm.snapshot()
	s.Now = now
	plan, err := fs.f.Fallback.Plan(ctx, s)
	if err != nil {
		return nil, err
	}
	fs.fbm.planned(now, plan)
	return plan, nil
}
