package policyrpc

import (
	"context"
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
	case plugins.KindOrder:
		return &orderHandle{handle{p: p}}
	}
	return nil
}

type handle struct {
	p      *Plugin
	mu     sync.Mutex
	last   error
	failed error // the first failure of any call
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
	if err != nil && h.failed == nil {
		h.failed = err
	}
	h.mu.Unlock()
}

// Failed is the first failure of any call whose method has no error result,
// nil when there was none: a caller whose results must be the plugin's
// (a replay) checks it once at the end.
func (h *handle) Failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// Plugin is the plugin behind the value (for its pid, restarts, Close).
func (h *handle) Plugin() *Plugin { return h.p }

// failed reports whether err says the plugin itself failed: its process
// is gone, or a call hung past the call timeout (the interfaces take no
// ctx, so a deadline is always the plugin's).
func failed(err error) bool {
	return errors.Is(err, wire.ErrPluginExited) || errors.Is(err, context.DeadlineExceeded)
}

// again runs f on the current client; when the plugin failed it restarts
// it and runs f once more; when that does not help and the plugin has a
// fallback, local answers with the fallback (from then on).
func again[C, R any](p *Plugin, f func(C) (R, error), local func(any) (R, error)) (R, error) {
	if fb := p.fallen(); fb != nil {
		return local(fb)
	}
	raw, gen := p.conn()
	r, err := f(raw.(C))
	if failed(err) {
		if p.revive(gen, err) {
			raw, _ = p.conn()
			r, err = f(raw.(C))
		}
		if failed(err) {
			if fb := p.fallDown(err); fb != nil {
				return local(fb)
			}
		}
	}
	return r, err
}

type feasibilityHandle struct{ handle }

var _ policy.Feasibility = (*feasibilityHandle)(nil)

func (h *feasibilityHandle) Feasible(d *policy.Demand, s *policy.Snapshot) (policy.Verdict, error) {
	return again(h.p, func(c *FeasibilityClient) (policy.Verdict, error) { return c.Feasible(d, s) },
		func(fb any) (policy.Verdict, error) { return fb.(policy.Feasibility).Feasible(d, s) })
}

func (h *feasibilityHandle) Late(d *policy.Demand, s *policy.Snapshot) (string, error) {
	return again(h.p, func(c *FeasibilityClient) (string, error) { return c.Late(d, s) },
		func(fb any) (string, error) { return fb.(policy.Feasibility).Late(d, s) })
}

type trustHandle struct{ handle }

var _ policy.Trust = (*trustHandle)(nil)

func (h *trustHandle) Scores(in *policy.TrustInput) (map[string]float64, error) {
	return again(h.p, func(c *TrustClient) (map[string]float64, error) { return c.Scores(in) },
		func(fb any) (map[string]float64, error) { return fb.(policy.Trust).Scores(in) })
}

func (h *trustHandle) Decay(o policy.Outcomes, elapsed, halfLife time.Duration) policy.Outcomes {
	d, err := again(h.p, func(c *TrustClient) (policy.Outcomes, error) { return c.decay(o, elapsed, halfLife) },
		func(fb any) (policy.Outcomes, error) { return fb.(policy.Trust).Decay(o, elapsed, halfLife), nil })
	h.note(err)
	return d
}

type remapHandle struct{ handle }

var _ policy.Remap = (*remapHandle)(nil)

func (h *remapHandle) Moves(in *policy.RemapInput) ([]policy.Move, error) {
	return again(h.p, func(c *RemapClient) ([]policy.Move, error) { return c.Moves(in) },
		func(fb any) ([]policy.Move, error) { return fb.(policy.Remap).Moves(in) })
}

type orderHandle struct{ handle }

var _ policy.Order = (*orderHandle)(nil)

func (h *orderHandle) Order(in *policy.OrderInput) ([]int, error) {
	return again(h.p, func(c *OrderClient) ([]int, error) { return c.Order(in) },
		func(fb any) ([]int, error) { return fb.(policy.Order).Order(in) })
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
	}, func(fb any) (tierAnswer, error) {
		t, why := fb.(policy.Tiering).Tier(d, sites)
		return tierAnswer{t, why}, nil
	})
	h.note(err)
	return a.t, a.why
}

func (h *tieringHandle) Copies(in *policy.CopyInput) (first, second []policy.Part) {
	p, err := again(h.p, func(c *TieringClient) ([2][]policy.Part, error) {
		f, s, err := c.copies(in)
		return [2][]policy.Part{f, s}, err
	}, func(fb any) ([2][]policy.Part, error) {
		f, s := fb.(policy.Tiering).Copies(in)
		return [2][]policy.Part{f, s}, nil
	})
	h.note(err)
	return p[0], p[1]
}

func (h *tieringHandle) Backup(in *policy.BackupInput) policy.Backup {
	b, err := again(h.p, func(c *TieringClient) (policy.Backup, error) { return c.backup(in) },
		func(fb any) (policy.Backup, error) { return fb.(policy.Tiering).Backup(in), nil })
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
	p     *Plugin
	res   []policy.ResvResource
	seed  uint64
	log   []bookOp // every call that may change the book, in order
	cur   *Book
	gen   uint64
	local policy.ReservationBook // the fallback's book, once the plugin failed for good
	last  error
	first error // the first failure of the plugin (not a policy answer)
}

// bookOp is one call on a book; it returns the call's error: the remote
// book's Err, or a local book's own error (Bind's).
type bookOp func(x policy.ReservationBook) error

func bookErr(x policy.ReservationBook, own error) error {
	if r, ok := x.(*Book); ok {
		return r.Err()
	}
	return own
}

var (
	_ policy.ReservationBook = (*bookHandle)(nil)
	_ policy.BookedStart     = (*bookHandle)(nil)
)

// Err is the failure of the book's last call (nil after a success).
func (b *bookHandle) Err() error { return b.last }

// Failed is the first call that failed for a reason other than the
// policy's own answer (the plugin died, hung or answered garbage), nil
// when there was none.
func (b *bookHandle) Failed() error { return b.first }

// Booked implements policy.BookedStart: the fallback's book once there is
// one, else what the plugin's replies carried (Book.Booked).
func (b *bookHandle) Booked(id string) (time.Time, bool) {
	if b.local != nil {
		if bs, ok := b.local.(policy.BookedStart); ok {
			return bs.Booked(id)
		}
		return time.Time{}, false
	}
	if b.cur == nil {
		return time.Time{}, false
	}
	return b.cur.Booked(id)
}

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
	for _, op := range b.log {
		if err := op(nb); err != nil && !remote(err) {
			return gen, err
		}
	}
	b.cur, b.gen = nb, gen
	return gen, nil
}

// fallBack makes the book the fallback's, its logged calls made again on
// it; false when the plugin has no fallback.
func (b *bookHandle) fallBack(fb any) bool {
	if fb == nil {
		return false
	}
	if b.local == nil {
		b.local = fb.(policy.Admission).NewBook(b.res, b.seed)
		for _, op := range b.log {
			_ = op(b.local)
		}
	}
	return true
}

// remote reports whether err is the policy's own answer (a RemoteError),
// not a failure of the transport.
func remote(err error) bool {
	var re *wire.RemoteError
	return errors.As(err, &re)
}

// do makes one call on the book: on the current process's book, once more
// on a restarted process when the plugin failed, then on the fallback's
// book when it has one. The call is logged (log) when the policy answered.
func (b *bookHandle) do(op bookOp, log bool) error {
	var err error
	switch {
	case b.local != nil || b.fallBack(b.p.fallen()):
		err = op(b.local)
	default:
		for attempt := 0; attempt < 2; attempt++ {
			var gen uint64
			if gen, err = b.ensure(); err == nil {
				err = op(b.cur)
			}
			if attempt == 0 && failed(err) && b.p.revive(gen, err) {
				continue
			}
			break
		}
		if failed(err) && b.fallBack(b.p.fallDown(err)) {
			err = op(b.local)
		}
	}
	if (err == nil || remote(err) || b.local != nil) && log {
		b.log = append(b.log, op)
	}
	b.last = err
	if err != nil && !remote(err) && b.first == nil {
		b.first = err
	}
	return err
}

func (b *bookHandle) Admit(q policy.ResvRequest, now time.Time, running []policy.ResvRunning) policy.Status {
	q.Allowed, running = slices.Clone(q.Allowed), slices.Clone(running)
	var st policy.Status
	err := b.do(func(x policy.ReservationBook) error { st = x.Admit(q, now, running); return bookErr(x, nil) }, true)
	if err != nil && !remote(err) {
		return policy.NewStatus(policy.Unresolvable, b.p.Kind, "admission plugin failed: "+err.Error())
	}
	return st
}

func (b *bookHandle) Bind(id string, now time.Time, running []policy.ResvRunning) (policy.ResvBinding, error) {
	running = slices.Clone(running)
	var rb policy.ResvBinding
	err := b.do(func(x policy.ReservationBook) error {
		var err error
		rb, err = x.Bind(id, now, running)
		return bookErr(x, err)
	}, true)
	return rb, err
}

func (b *bookHandle) Remove(id string) {
	_ = b.do(func(x policy.ReservationBook) error { x.Remove(id); return bookErr(x, nil) }, true)
}

func (b *bookHandle) Reservations() []string {
	var ids []string
	_ = b.do(func(x policy.ReservationBook) error { ids = x.Reservations(); return bookErr(x, nil) }, false)
	return ids
}

func (b *bookHandle) AddResource(r policy.ResvResource) {
	_ = b.do(func(x policy.ReservationBook) error { x.AddResource(r); return bookErr(x, nil) }, true)
}

func (b *bookHandle) SetCapacity(name string, capacity int) (dropped []string) {
	_ = b.do(func(x policy.ReservationBook) error { dropped = x.SetCapacity(name, capacity); return bookErr(x, nil) }, true)
	return dropped
}

func (b *bookHandle) FailResource(name string) (dropped []string) {
	_ = b.do(func(x policy.ReservationBook) error { dropped = x.FailResource(name); return bookErr(x, nil) }, true)
	return dropped
}
