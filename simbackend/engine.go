package simbackend

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Event classes order events that fall on the same instant: a lower class
// runs first, and inside a class the event scheduled first runs first.
// At and After use ClassDefault.
const (
	// ClassEarly runs before ordinary events at the same instant. Sites in
	// gridsub's default mode handle job ends in this class, so nodes freed at
	// t are visible to anything submitted at t.
	ClassEarly = -1
	// ClassDefault is the class of At and After (broker cycles, submissions
	// of a trace replay).
	ClassDefault = 0
	// ClassLate runs after ordinary events at the same instant. Sites in
	// reference-compatible mode handle job ends in this class (rule 3 of the
	// reference simulator: submissions first, then terminations).
	ClassLate = 1
)

// Event is a scheduled callback. Cancel it with Engine.Cancel or Event.Cancel.
type Event struct {
	e     *Engine
	t     int64 // ns since the engine's epoch
	class int
	seq   uint64
	idx   int // position in the heap; -1 once popped or cancelled
	fn    func()
}

// Time is the instant the event fires at.
func (ev *Event) Time() time.Time { return ev.e.epoch.Add(time.Duration(ev.t)) }

// Cancel removes the event if it has not run yet. It reports whether it did.
// Cancelling twice, or after the event ran, is a no-op.
func (ev *Event) Cancel() bool {
	ev.e.mu.Lock()
	defer ev.e.mu.Unlock()
	return ev.e.cancel(ev)
}

// Engine is a discrete-event engine on a virtual clock.
//
// Events are ordered by (time, class, sequence number): at the same instant a
// lower class runs first, and inside a class events run in the order they
// were scheduled. The clock never goes backwards: an event scheduled in the
// past runs at the current time. Randomness comes only from Rand, a PCG
// seeded at construction, so a run is a pure function of its inputs and seed.
//
// Concurrency: the engine owns a mutex that guards its clock and heap and,
// by convention, the state of every Site built on it. All exported methods
// are safe to call from several goroutines. Event callbacks run WITHOUT the
// mutex held, so a callback may call At, After, Now or any Site method; the
// Site's own callbacks take the mutex themselves. Only one goroutine should
// drive the engine (Step, RunUntil, Run, Follow) at a time: the schedule is
// deterministic only when a single driver runs it.
type Engine struct {
	mu    sync.Mutex
	epoch time.Time
	now   int64 // ns since epoch
	seq   uint64
	heap  []*Event
	rng   *rand.Rand
}

// NewEngine returns an engine whose clock starts at epoch, with all
// randomness derived from seed.
func NewEngine(epoch time.Time, seed uint64) *Engine {
	return &Engine{
		epoch: epoch,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Epoch is the instant the clock started at.
func (e *Engine) Epoch() time.Time { return e.epoch }

// Now is the current virtual time.
func (e *Engine) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.epoch.Add(time.Duration(e.now))
}

// Rand is the engine's seeded random source. It is not safe for concurrent
// use: draw from it on the driving goroutine (or inside callbacks) only.
func (e *Engine) Rand() *rand.Rand { return e.rng }

// At schedules fn at t (or now, if t is in the past) in ClassDefault.
func (e *Engine) At(t time.Time, fn func()) *Event { return e.AtClass(t, ClassDefault, fn) }

// After schedules fn d after now in ClassDefault.
func (e *Engine) After(d time.Duration, fn func()) *Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.schedule(e.now+int64(d), ClassDefault, fn)
}

// AtClass schedules fn at t in the given class (see ClassEarly, ClassLate).
func (e *Engine) AtClass(t time.Time, class int, fn func()) *Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.schedule(int64(t.Sub(e.epoch)), class, fn)
}

// Cancel removes ev if it has not run yet and reports whether it did.
func (e *Engine) Cancel(ev *Event) bool {
	if ev == nil {
		return false
	}
	return ev.Cancel()
}

// Peek returns the time of the next event, if any.
func (e *Engine) Peek() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.heap) == 0 {
		return time.Time{}, false
	}
	return e.epoch.Add(time.Duration(e.heap[0].t)), true
}

// Pending is the number of scheduled events.
func (e *Engine) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.heap)
}

// Step runs the next event, advancing the clock to it. It reports false when
// there was no event.
func (e *Engine) Step() bool {
	e.mu.Lock()
	if len(e.heap) == 0 {
		e.mu.Unlock()
		return false
	}
	ev := e.pop()
	if ev.t > e.now {
		e.now = ev.t
	}
	e.mu.Unlock()
	ev.fn()
	return true
}

// RunUntil runs every event at or before t, then sets the clock to t (if t
// is later than the clock).
func (e *Engine) RunUntil(t time.Time) {
	lim := int64(t.Sub(e.epoch))
	for {
		e.mu.Lock()
		if len(e.heap) == 0 || e.heap[0].t > lim {
			if lim > e.now {
				e.now = lim
			}
			e.mu.Unlock()
			return
		}
		ev := e.pop()
		if ev.t > e.now {
			e.now = ev.t
		}
		e.mu.Unlock()
		ev.fn()
	}
}

// Run runs events as fast as possible until none is left.
func (e *Engine) Run() {
	for e.Step() {
	}
}

// RunContext is Run that stops early when ctx is done, returning ctx.Err().
// ctx is checked every 1024 events.
func (e *Engine) RunContext(ctx context.Context) error {
	for n := 0; ; n++ {
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !e.Step() {
			return nil
		}
	}
}

// Follow drives the engine in scaled wall time until ctx is done: every
// tick of the wall clock it runs the events up to
// start + scale × (wall time elapsed since Follow was called), where start is
// the virtual time when Follow was called, then calls onTick (if non-nil)
// with the new virtual time. scale 1 is real time; 60 makes a virtual minute
// pass every wall second. It returns ctx.Err(). This is the only place the
// package reads the wall clock; for trace replay use Run or RunUntil.
func (e *Engine) Follow(ctx context.Context, scale float64, tick time.Duration, onTick func(now time.Time)) error {
	if scale <= 0 {
		scale = 1
	}
	if tick <= 0 {
		tick = 100 * time.Millisecond
	}
	start := e.Now()
	wall0 := time.Now()
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case w := <-tk.C:
			target := start.Add(time.Duration(float64(w.Sub(wall0)) * scale))
			e.RunUntil(target)
			if onTick != nil {
				onTick(e.Now())
			}
		}
	}
}

// --- unlocked internals: the caller holds e.mu ---

func (e *Engine) nowNS() int64 { return e.now }

func (e *Engine) timeOf(ns int64) time.Time { return e.epoch.Add(time.Duration(ns)) }

func (e *Engine) schedule(t int64, class int, fn func()) *Event {
	ev := &Event{fn: fn}
	e.scheduleInto(ev, t, class)
	return ev
}

// scheduleInto schedules a caller-owned event (fn already set) that is not
// in the heap; hot paths reuse one Event per object this way.
func (e *Engine) scheduleInto(ev *Event, t int64, class int) {
	if t < e.now {
		t = e.now
	}
	e.seq++
	ev.e, ev.t, ev.class, ev.seq, ev.idx = e, t, class, e.seq, len(e.heap)
	e.heap = append(e.heap, ev)
	e.up(ev.idx)
}

func (e *Engine) cancel(ev *Event) bool {
	i := ev.idx
	if i < 0 || i >= len(e.heap) || e.heap[i] != ev {
		return false
	}
	last := len(e.heap) - 1
	if i != last {
		e.swap(i, last)
	}
	e.heap[last] = nil
	e.heap = e.heap[:last]
	ev.idx = -1
	if i != last {
		if !e.down(i) {
			e.up(i)
		}
	}
	return true
}

func (e *Engine) pop() *Event {
	ev := e.heap[0]
	last := len(e.heap) - 1
	e.swap(0, last)
	e.heap[last] = nil
	e.heap = e.heap[:last]
	if last > 0 {
		e.down(0)
	}
	ev.idx = -1
	return ev
}

func (e *Engine) less(i, j int) bool {
	a, b := e.heap[i], e.heap[j]
	if a.t != b.t {
		return a.t < b.t
	}
	if a.class != b.class {
		return a.class < b.class
	}
	return a.seq < b.seq
}

func (e *Engine) swap(i, j int) {
	e.heap[i], e.heap[j] = e.heap[j], e.heap[i]
	e.heap[i].idx = i
	e.heap[j].idx = j
}

func (e *Engine) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !e.less(j, i) {
			break
		}
		e.swap(i, j)
		j = i
	}
}

func (e *Engine) down(i0 int) bool {
	n := len(e.heap)
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n {
			break
		}
		j := j1
		if j2 := j1 + 1; j2 < n && e.less(j2, j1) {
			j = j2
		}
		if !e.less(j, i) {
			break
		}
		e.swap(i, j)
		i = j
	}
	return i > i0
}
