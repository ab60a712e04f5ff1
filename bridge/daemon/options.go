package daemon

import (
	"fmt"
	"math"
	"time"
)

// The bounds of the daemon's clock: its cycle interval (and the poll
// interval and every "@every" period of its cron) and the simulated
// clock's speed. The configuration checks broker.interval and
// sim.time_scale against these.
const (
	MinInterval                = 10 * time.Millisecond
	MaxInterval                = 366 * 24 * time.Hour
	MinTimeScale, MaxTimeScale = 0.01, 1e4
)

// check bounds the numeric options that can come from flags rather than
// the (already validated) configuration: --time-scale and the periods. Out
// of range they would stall the simulated clock (a scale of 1e-300) or run
// it past what a time.Duration holds (1e300, NaN). (--keep-history and
// --trust-half-life cannot overflow: any duration the flag parses works.)
func (o *Options) check() error {
	bad := func(name string, v any, want string) error {
		return fmt.Errorf("%w: %s %v: want %s", ErrOptions, name, v, want)
	}
	if s := o.TimeScale; s != 0 && !(s >= MinTimeScale && s <= MaxTimeScale) || math.IsNaN(s) {
		return bad("time scale", s, fmt.Sprintf("from %v to %v virtual seconds per wall second (0 = the configuration's)", MinTimeScale, MaxTimeScale))
	}
	if s := o.Spec.TimeScale; s != 0 && !(s >= MinTimeScale && s <= MaxTimeScale) || math.IsNaN(s) {
		return bad("sim.time_scale", s, fmt.Sprintf("from %v to %v", MinTimeScale, MaxTimeScale))
	}
	if d := o.Interval; d != 0 && (d < MinInterval || d > MaxInterval) {
		return bad("interval", d, fmt.Sprintf("from %s to %s", MinInterval, MaxInterval))
	}
	if d := o.SimTick; d != 0 && (d < time.Millisecond || d > time.Minute) {
		return bad("simulation tick", d, "from 1ms to 1m")
	}
	return nil
}
