package backends

import "context"

// Watcher is an optional capability: the backend pushes every change of its
// jobs' state instead of waiting to be polled.
//
// Contract: Watch calls fn once per change, in the order the changes
// happened, from one goroutine at a time, until ctx is done (then it returns
// ctx.Err()) or the backend can no longer report (then it returns why,
// wrapping ErrUnavailable when watching again later may work). fn must not
// block for long: it holds up the next change.
type Watcher interface {
	Watch(ctx context.Context, fn func(JobStatus)) error
}

// Capabilities says which optional capabilities a backend has. In process a
// backend has a capability when it implements the interface; a backend
// reached through a plugin boundary is one Go type implementing every
// interface and declares what its plugin really supports (Declarer).
type Capabilities struct {
	Find    bool // Finder: look jobs up by grid id
	Fetch   bool // Fetcher: bring outputs back
	Reserve bool // Reserver: native advance reservations
	Push    bool // Watcher: pushed status changes
	Link    bool // LinkEstimator: measured transfer cost
	Conn    bool // Connectivity: why the site's connection is down
	Batch   bool // BatchSubmitter: many submissions in one remote command
	Data    bool // DataHolder: files that lie at the site (sitedata.go)
}

// Declarer is implemented by a backend that declares its capabilities
// rather than having them found by type assertion (a plugin client shim).
// A declared capability must still be implemented as its interface; one not
// declared is treated as absent even when the interface is there.
type Declarer interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns b's capabilities: the declared ones when b is a
// Declarer, else those whose interface b implements. Callers ask it (or the
// As* helpers) before using an optional capability, never a bare type
// assertion.
func CapabilitiesOf(b Backend) Capabilities {
	if d, ok := b.(Declarer); ok {
		c := d.Capabilities()
		// A declaration cannot grant what the type does not implement.
		_, f := b.(Finder)
		_, fe := b.(Fetcher)
		_, r := b.(Reserver)
		_, w := b.(Watcher)
		_, l := b.(LinkEstimator)
		_, cn := b.(Connectivity)
		_, bs := b.(BatchSubmitter)
		_, dh := b.(DataHolder)
		return Capabilities{Find: c.Find && f, Fetch: c.Fetch && fe, Reserve: c.Reserve && r,
			Push: c.Push && w, Link: c.Link && l, Conn: c.Conn && cn, Batch: c.Batch && bs, Data: c.Data && dh}
	}
	_, f := b.(Finder)
	_, fe := b.(Fetcher)
	_, r := b.(Reserver)
	_, w := b.(Watcher)
	_, l := b.(LinkEstimator)
	_, cn := b.(Connectivity)
	_, bs := b.(BatchSubmitter)
	_, dh := b.(DataHolder)
	return Capabilities{Find: f, Fetch: fe, Reserve: r, Push: w, Link: l, Conn: cn, Batch: bs, Data: dh}
}

// AsFinder returns b as a Finder when it has that capability.
func AsFinder(b Backend) (Finder, bool) {
	f, ok := b.(Finder)
	return f, ok && CapabilitiesOf(b).Find
}

// AsFetcher returns b as a Fetcher when it has that capability.
func AsFetcher(b Backend) (Fetcher, bool) {
	f, ok := b.(Fetcher)
	return f, ok && CapabilitiesOf(b).Fetch
}

// AsReserver returns b as a Reserver when it has that capability.
func AsReserver(b Backend) (Reserver, bool) {
	r, ok := b.(Reserver)
	return r, ok && CapabilitiesOf(b).Reserve
}

// AsWatcher returns b as a Watcher when it has that capability.
func AsWatcher(b Backend) (Watcher, bool) {
	w, ok := b.(Watcher)
	return w, ok && CapabilitiesOf(b).Push
}

// AsLinkEstimator returns b as a LinkEstimator when it has that capability.
func AsLinkEstimator(b Backend) (LinkEstimator, bool) {
	l, ok := b.(LinkEstimator)
	return l, ok && CapabilitiesOf(b).Link
}

// AsConnectivity returns b as a Connectivity when it has that capability.
func AsConnectivity(b Backend) (Connectivity, bool) {
	c, ok := b.(Connectivity)
	return c, ok && CapabilitiesOf(b).Conn
}
