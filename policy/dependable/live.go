package dependable

import (
	"sync"
	"time"
)

// Live adapts a Predictor to a live broker that reports each change of a
// site's availability (up or not) and each job or node it lost, and asks for
// the reliability cost of a copy without a time: Now supplies the broker's
// clock (its virtual clock in a simulation), so the Predictor itself stays
// free of any clock. RC is in seconds, (1 − r)·ct. Observe maps up=true to
// Up and up=false (the site stopped answering) to Down; Lost is Fail (a job
// or node lost while the site answers). An out-of-order observation is
// dropped, as the Predictor refuses it. Live is safe for concurrent use.
type Live struct {
	mu  sync.Mutex
	p   *Predictor
	now func() time.Time
	gen uint64 // observations accepted, for Changed
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

// Reliability is r for a job that needs d at site from now.
func (l *Live) Reliability(site string, d time.Duration) float64 {
	at := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.Reliability(site, at, d)
}

// Observe records a change of site's availability at time at.
func (l *Live) Observe(site string, up bool, at time.Time) {
	ev := Down
	if up {
		ev = Up
	}
	l.observe(site, ev, at)
}

// Lost records that site lost a job or a node at time at while it kept
// answering: a failure it survives at once (Fail).
func (l *Live) Lost(site string, at time.Time) { l.observe(site, Fail, at) }

func (l *Live) observe(site string, ev Event, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.p.sites[site]
	var was siteState
	if before != nil {
		was = *before
	}
	if l.p.Observe(site, ev, at) != nil { // ErrOutOfOrder: an older report changes nothing
		return
	}
	now := l.p.sites[site]
	if before == nil || now.up != was.up || !now.since.Equal(was.since) {
		l.gen++ // a new site, a change of up/down, or an uptime ended (a TTF learned)
	}
}

// Changed returns a number that grows with every observation that changed
// what the model knows (a new site, up/down, a failure learned), not with
// one that only confirms it: a caller that persists the state saves it when
// the number moved.
func (l *Live) Changed() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
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
