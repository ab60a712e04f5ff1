package daemon

import (
	"context"
	"time"

	"github.com/robfig/cron/v3"
)

// vclock runs the periodic tasks on the simulated clock: with simulated
// sites the daemon's broker lives on virtual time, so a task's schedule is
// evaluated as Schedule.Next(virtualNow) (DESIGN.md, "Periodic work"),
// never on the wall clock — "@every 10s" of reservation binding is ten
// simulated seconds, as the reservations' windows are. The worker checks
// it after each advance of the engine (every Options.SimTick of wall
// time), so no task runs more often than that, and a task due several
// times over one tick runs once.
type vclock struct {
	sched map[string]cron.Schedule
	next  map[string]time.Time
}

// newVClock starts every task's schedule at the virtual time now.
func newVClock(scheds map[string]cron.Schedule, now time.Time) *vclock {
	v := &vclock{sched: scheds, next: make(map[string]time.Time, len(scheds))}
	for name, s := range scheds {
		v.next[name] = s.Next(now)
	}
	return v
}

// due returns the tasks due at the virtual time now, in the worker's
// order (Tasks), and moves each one's next run past now.
func (v *vclock) due(now time.Time) []string {
	var out []string
	for _, name := range Tasks {
		n, ok := v.next[name]
		if !ok || now.Before(n) {
			continue
		}
		out = append(out, name)
		v.next[name] = v.sched[name].Next(now)
	}
	return out
}

// runDue runs the tasks the simulated clock says are due (worker only).
func (d *Daemon) runDue(ctx context.Context) {
	if d.vclock == nil {
		return
	}
	for _, task := range d.vclock.due(d.env.Now()) {
		d.pending[task].Store(false)
		d.busy.Store(time.Now().UnixNano())
		d.run(ctx, task)
		d.busy.Store(0)
	}
}
