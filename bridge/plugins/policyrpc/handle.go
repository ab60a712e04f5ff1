package policyrpc

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
	"github.com/gridsub/gridsub/policy"
)

// A Plugin's stable policy values (Plugin.Policy): each forwards to the
// current process's client, and a call that finds the process gone
// (wire.ErrPluginExited) restarts it (Plugin.revive) and is made once
// more. The policies are pure, so the second call answers what the first
// would have; an admission book is rebuilt on the new process from the
// calls made on it (bookHandle).

func newHandle(p *Plugin) any {
	switch p.Kind {
	case plugins.KindFeasibility:
		return &feasibilityHandle{handle{p: p}}
	case plugins.KindAdmission:
		return &admissionHandle{handle{p: p}}
	case plugins.KindTrust:
		return &trustHandle{handle{p: p}}
	case plugins.KindTiering:
		return &tieringHandle{handle{p: p}}
	case plugins.KindRemap:
		return &remapHandle{handle{p: p}}
	}
	return nil
}

type handle struct {
	p    *Plugin
	mu   sync.Mutex
	last error
}

// Name is the name the current process's policy gave.
func (h *handle) Name() string {
	c, _ := h.p.conn()
	return c.(interface{ Name() string }).Name()
}

// Err is the failure of the last call whose method has no error result
// (nil after it succeeded): the method answered its safe value instead.
func (h *handle) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *handle) note(err error) {
	h.mu.Lock()
	h.last = err
	h.mu.Unlock()
}

// Plugin is the plugin behind the value (for its pid, restarts, Close).
func (h *handle) Plugin() *Plugin { return h.p }

// again runs f on the current client and, when it finds the process gone,
// once more on a restarted one.
func again[C, R any](p *Plugin, f func(C) (R, error)) (R, error) {
	raw, gen := p.conn()
	r, err := f(raw.(C))
	if errors.Is(err, wire.ErrPluginExited) && p.revive(gen) {
		raw, _ = p.conn()
		r, err = f(raw.(C))
	}
	return r, err
}

type feasibilityHandle struct{ handle }

var _ policy.Feasibility = (*feasibilityHandle)(nil)

func (h *feasibilityHandle) Feasible(d *policy.Demand, s *policy.Snapshot) (policy.Verdict, error) {
	return again(h.p, func(c *FeasibilityClient) (policy.Verdict, error) { return c.Feasible(d, s) })
}

func (h *feasibilityHandle) Late(d *policy.Demand, s *policy.Snapshot) (string, error) {
	return again(h.p, func(c *FeasibilityClient) (string, error) { return c.Late(d, s) })
}

type trustHandle struct{ handle }

var _ policy.Trust = (*trustHandle)(nil)

func (h *trustHandle) Scores(in *policy.TrustInput) (map[string]float64, error) {
	return again(h.p, func(c *TrustClient) (map[string]float64, error) { return c.Scores(in) })
}

func (h *trustHandle) Decay(o policy.Outcomes, elapsed, halfLife time.Duration) policy.Outcomes {
	d, err := again(h.p, func(c *TrustClient) (policy.Outcomes, error) { return c.decay(o, elapsed, halfLife) })
	h.note(err)
	return d
}

type remapHandle struct{ handle }

var _ policy.Remap = (*remapHandle)(nil)

func (h *remapHandle) Moves(in *policy.RemapInput) ([]policy.Move, error) {
	return again(h.p, func(c *RemapClient) ([]policy.Move, error) { return c.Moves(in) })
}

type tieringHandle struct{ handle }

var _ policy.Tiering = (*tieringHandle)(nil)

type tierAnswer struct {
	t   policy.Tier
	why string
}

func (h *tieringHandle) Tier(d *policy.TierDemand, sites []policy.Site) (policy.Tier, string) {
	a, err := again(h.p, func(c *TieringClient) (tierAnswer, error) {
		t, why, err := c.tier(d, sites)
		return tierAnswer{t, why}, err
	})
	h.note(err)
	return a.t, a.why
}

func (h *tieringHandle) Copies(in *policy.CopyInput) (first, second []policy.Part) {
	p, err := again(h.p, func(c *TieringClient) ([2][]policy.Part, error) {
		f, s, err := c.copies(in)
		return [2][]policy.Part{f, s}, err
	})
	h.note(err)
	return p[0], p[1]
}

func (h *tieringHandle) Backup(in *policy.BackupInput) policy.Backup {
	b, err := again(h.p, func(c *TieringClient) (policy.Backup, error) { return c.backup(in) })
	h.note(err)
	return b
}

type admissionHandle struct{ handle }

var _ policy.Admission = (*admissionHandle)(nil)

// NewBook returns a book that lives on whichever process the plugin runs:
// it is opened on the current one at its first call and rebuilt on a new
// one, after a restart, by making its calls again in order (a book is
// deterministic, so the rebuilt one is the same book). The log of calls
// grows with the book's use; Close frees it.
func (h *admissionHandle) NewBook(res []policy.ResvResource, seed uint64) policy.ReservationBook {
	return &bookHandle{p: h.p, res: slices.Clone(res), seed: seed}
}

// bookHandle is a ReservationBook over a restartable plugin. Not safe for
// concurrent use (as every book).
type bookHandle struct {
	p    *Plugin
	res  []policy.ResvResource
	seed uint64
	log  []func(policy.ReservationBook) // every call that may change the book, in order
	cur  *Book
	gen  uint64
	last error
}

var _ policy.ReservationBook = (*bookHandle)(nil)

// Err is the failure of the book's last call (nil after a success).
func (b *bookHandle) Err() error { return b.last }

// Close frees the book in the plugin.
func (b *bookHandle) Close() error {
	b.log = nil
	if b.cur == nil {
		return nil
	}
	err := b.cur.Close()
	b.cur = nil
	return err
}

// ensure opens the book on the current process when it has none there,
// making its logged calls again.
func (b *bookHandle) ensure() (uint64, error) {
	raw, gen := b.p.conn()
	if b.cur != nil && b.gen == gen {
		return gen, nil
	}
	nb := raw.(*AdmissionClient).NewBook(b.res, b.seed).(*Book)
	if nb.broken != nil {
		return gen, nb.broken
	}
	for _, f := range b.log {
		f(nb)
		if err := nb.Err(); err != nil && !remote(err) {
			return gen, err
		}
	}
	b.cur, b.gen = nb, gen
	return gen, nil
}

// remote reports whether err is the policy's own answer (a RemoteError),
// not a failure of the transport.
func remote(err error) bool {
	var re *wire.RemoteError
	return errors.As(err, &re)
}

// do runs f (which returns the book's Err after its call) on the current
// process's book, once more on a restarted process when it finds the
// process gone; it logs the call (record) when the policy answered.
func (b *bookHandle) do(f func(*Book) error, record func(policy.ReservationBook)) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var gen uint64
		if gen, err = b.ensure(); err == nil {
			err = f(b.cur)
		}
		if attempt == 0 && errors.Is(err, wire.ErrPluginExited) && b.p.revive(gen) {
			continue
		}
		break
	}
	if (err == nil || remote(err)) && record != nil {
		b.log = append(b.log, record)
	}
	b.last = err
	return err
}

func (b *bookHandle) Admit(q policy.ResvRequest, now time.Time, running []policy.ResvRunning) policy.Status {
	q.Allowed, running = slices.Clone(q.Allowed), slices.Clone(running)
	var st policy.Status
	err := b.do(func(x *Book) error { st = x.Admit(q, now, running); return x.Err() },
		func(x policy.ReservationBook) { x.Admit(q, now, running) })
	if err != nil && !remote(err) {
		return policy.NewStatus(policy.Unresolvable, b.p.Kind, "admission plugin failed: "+err.Error())
	}
	return st
}

func (b *bookHandle) Bind(id string, now time.Time, running []policy.ResvRunning) (policy.ResvBinding, error) {
	running = slices.Clone(running)
	var rb policy.ResvBinding
	err := b.do(func(x *Book) error { rb, _ = x.Bind(id, now, running); return x.Err() },
		func(x policy.ReservationBook) { x.Bind(id, now, running) })
	return rb, err
}

func (b *bookHandle) Remove(id string) {
	_ = b.do(func(x *Book) error { x.Remove(id); return x.Err() }, func(x policy.ReservationBook) { x.Remove(id) })
}

func (b *bookHandle) Reservations() []string {
	var ids []string
	_ = b.do(func(x *Book) error { ids = x.Reservations(); return x.Err() }, nil)
	return ids
}

func (b *bookHandle) AddResource(r policy.ResvResource) {
	_ = b.do(func(x *Book) error { x.AddResource(r); return x.Err() }, func(x policy.ReservationBook) { x.AddResource(r) })
}

func (b *bookHandle) SetCapacity(name string, capacity int) (dropped []string) {
	_ = b.do(func(x *Book) error { dropped = x.SetCapacity(name, capacity); return x.Err() },
		func(x policy.ReservationBook) { x.SetCapacity(name, capacity) })
	return dropped
}

func (b *bookHandle) FailResource(name string) (dropped []string) {
	_ = b.do(func(x *Book) error { dropped = x.FailResource(name); return x.Err() },
		func(x policy.ReservationBook) { x.FailResource(name) })
	return dropped
}
