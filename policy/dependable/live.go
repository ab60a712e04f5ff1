package dependable

import (
	"sync"
	"time"
)

// Live adapts a Predictor to a live broker that reports each change of a
// site's availability (up or not) and asks for the reliability cost of a
// copy without a time: Now supplies the broker's clock (its virtual clock in
// a simulation), so the Predictor itself stays free of any clock. RC is in
// seconds, (1 − r)·ct. Observe maps up=true to Up and up=false (the site
// stopped answering, or lost a job) to Down; an out-of-order observation is
// dropped, as the Predictor refuses it. Live is safe for concurrent use.
type Live struct {
	mu  sync.Mutex
	p   *Predictor
	now func() time.Time
}

// NewLive wraps p with the clock now.
func NewLive(p *Predictor, now func() time.Time) *Live { return &Live{p: p, now: now} }

// RC is the reliability cost in seconds of running for ct at site from now.
func (l *Live) RC(site string, ct time.Duration) float64 {
	at := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.RC(site, at, ct).Seconds()
}

// Observe records a change of site's availability at time at.
func (l *Live) Observe(site string, up bool, at time.Time) {
	ev := Down
	if up {
		ev = Up
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.p.Observe(site, ev, at) // ErrOutOfOrder: an older report changes nothing
}

// Sites is Predictor.Sites, for display.
func (l *Live) Sites() []SiteView {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.Sites()
}

// MarshalJSON is the predictor's learned state, for the store.
func (l *Live) MarshalJSON() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.MarshalJSON()
}
