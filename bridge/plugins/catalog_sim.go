package plugins

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
	"github.com/gridsub/gridsub/simbackend"
)

// SimSite is a simulated site with an engine of its own, as the sim plugin
// serves it: a backends.Watcher (its OnChange notes fan out to every
// watcher) and a backendrpc.SimClock.
type SimSite struct {
	*simbackend.Site
	e *simbackend.Engine

	mu       sync.Mutex
	watchers []*func(backends.JobStatus)
}

var (
	_ backends.Watcher    = (*SimSite)(nil)
	_ backends.Finder     = (*SimSite)(nil)
	_ backends.Reserver   = (*SimSite)(nil)
	_ backendrpc.SimClock = (*SimSite)(nil)
)

// Kind is "sim".
func (s *SimSite) Kind() string { return "sim" }

func (s *SimSite) publish(st backends.JobStatus) {
	s.mu.Lock()
	ws := slices.Clone(s.watchers)
	s.mu.Unlock()
	for _, w := range ws {
		(*w)(st)
	}
}

// Watch implements backends.Watcher.
func (s *SimSite) Watch(ctx context.Context, fn func(backends.JobStatus)) error {
	var mu sync.Mutex // one call of fn at a time
	f := func(st backends.JobStatus) {
		mu.Lock()
		defer mu.Unlock()
		fn(st)
	}
	s.mu.Lock()
	s.watchers = append(s.watchers, &f)
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.watchers = slices.DeleteFunc(s.watchers, func(w *func(backends.JobStatus)) bool { return w == &f })
	s.mu.Unlock()
	return ctx.Err()
}

// AdvanceTo implements backendrpc.SimClock.
func (s *SimSite) AdvanceTo(ctx context.Context, until time.Time) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return s.e.Now(), err
	}
	if until.After(s.e.Now()) {
		s.e.RunUntil(until)
	}
	return s.e.Now(), nil
}
