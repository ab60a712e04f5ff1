package daemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Task names: the keys of broker.cron the daemon acts on.
const (
	TaskCycle   = "cycle"
	TaskHealth  = "health"
	TaskCleanup = "history_cleanup"
	TaskBind    = "reservation_binding"
	TaskTrust   = "trust"
)

// Tasks lists the task names in the order the worker prefers them.
var Tasks = []string{TaskCycle, TaskBind, TaskHealth, TaskTrust, TaskCleanup}

// every is a constant period that, unlike cron.Every, keeps sub-second
// periods ("@every 200ms") as written.
type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// ParseSpec parses one schedule: "@every <duration>" (any positive
// duration), or anything cron.ParseStandard accepts ("@daily",
// "*/5 * * * *").
func ParseSpec(spec string) (cron.Schedule, error) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: %q: want a positive duration after @every, e.g. \"@every 1s\"", ErrSchedule, spec)
		}
		return every(d), nil
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a cron spec (e.g. \"@every 10m\", \"@daily\" or \"*/5 * * * *\"): %w", ErrSchedule, spec, err)
	}
	return s, nil
}

// schedules returns the schedule of every task: the configured spec or the
// default. Names that are not tasks are returned in unknown.
func schedules(cfg map[string]string, interval time.Duration) (map[string]cron.Schedule, []string, error) {
	if interval <= 0 {
		interval = time.Second
	}
	specs := map[string]string{
		TaskCycle:   "@every " + interval.String(),
		TaskHealth:  "@every 1m",
		TaskCleanup: "@daily",
		TaskBind:    "@every 10s",
		TaskTrust:   "@every 5m",
	}
	var unknown []string
	for name, spec := range cfg {
		if !slices.Contains(Tasks, name) {
			unknown = append(unknown, name)
			continue
		}
		specs[name] = spec
	}
	slices.Sort(unknown)
	out := map[string]cron.Schedule{}
	for name, spec := range specs {
		s, err := ParseSpec(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("broker.cron.%s: %w", name, err)
		}
		out[name] = s
	}
	return out, unknown, nil
}
