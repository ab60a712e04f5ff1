package bridge

import (
	"context"
	"math"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// The users' accounted use (fair share, Policies.Order): when a job that
// ran reaches a final state, the ledger charges its use to its owner —
// n nodes from Start to End, decayed to End:
//
//	n · h/ln2 · (1 - 2^(-(End - Start)/h))      node-seconds at End
//
// — and keeps one UserUse per user, the sum of their charges decayed to
// the latest of them. A UsageStore keeps that sum durable, updated in the
// transaction of the write that first stores the job's final state, so a
// restarted broker orders its queue by the same use as before.

// UsageKeyPrefix is the ValueStore key prefix of the users' accounted use
// (one key per user: the prefix and the user's name) in stores that keep
// it among their values.
const UsageKeyPrefix = "fairshare.use/"

// Charge is one ended job's use, for its owner's account: NodeSeconds of
// use decayed to At (the job's end), to be added with half-life HalfLife.
type Charge struct {
	User        string
	NodeSeconds float64
	At          time.Time
	HalfLife    time.Duration
}

// UserUse is a user's accounted use: NodeSeconds of decayed use as of At.
type UserUse struct {
	NodeSeconds float64
	At          time.Time
}

// Add is u with c added, both decayed to the later of their times: the
// sum Σ cᵢ · 2^(-(T - tᵢ)/h) does not depend on the order the charges are
// added in (up to rounding). A charge that is not a finite positive use
// leaves u as it is.
func (u UserUse) Add(c Charge) UserUse {
	if !(c.NodeSeconds > 0) || math.IsInf(c.NodeSeconds, 0) {
		return u
	}
	h := c.HalfLife
	if h <= 0 {
		h = policy.DefaultHalfLife
	}
	if u.At.IsZero() || !(u.NodeSeconds > 0) {
		return UserUse{NodeSeconds: c.NodeSeconds, At: c.At}
	}
	at := u.At
	if c.At.After(at) {
		at = c.At
	}
	decay := func(d time.Duration) float64 { return math.Exp2(-d.Seconds() / h.Seconds()) }
	return UserUse{NodeSeconds: u.NodeSeconds*decay(at.Sub(u.At)) + c.NodeSeconds*decay(at.Sub(c.At)), At: at}
}

// ChargeOf is the use of n nodes from start to end decayed to end, with
// half-life h (0: the default): n · h/ln2 · (1 - 2^(-(end - start)/h)).
func ChargeOf(n int, start, end time.Time, h time.Duration) float64 {
	if h <= 0 {
		h = policy.DefaultHalfLife
	}
	if n <= 0 || !end.After(start) {
		return 0
	}
	hs := h.Seconds()
	return float64(n) * hs / math.Ln2 * (1 - math.Exp2(-end.Sub(start).Seconds()/hs))
}

// UsageStore is optionally implemented by a Store that keeps the users'
// accounted use durable (both stores of bridge/store do; MemStore in
// memory).
//
// Contract: PutCharged is Put, and, in the same transaction, when that
// write is the first to store j in a final state (a job whose stored
// state was already final, or a write of a state that is not final,
// charges nothing), adds c to c.User's accounted use by UserUse.Add: a
// job is charged once however often it is written. Usage returns every
// user's accounted use; a value it cannot read is an error naming it.
type UsageStore interface {
	PutCharged(ctx context.Context, j *Job, c Charge) error
	Usage(ctx context.Context) (map[string]UserUse, error)
}

var _ UsageStore = (*MemStore)(nil)

// PutCharged implements UsageStore.
func (m *MemStore) PutCharged(_ context.Context, j *Job, c Charge) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.jobs[j.ID]
	if j.State.Final() && (!ok || !old.State.Final()) {
		if m.use == nil {
			m.use = map[string]UserUse{}
		}
		m.use[c.User] = m.use[c.User].Add(c)
	}
	if !ok {
		m.ord[j.ID] = uint64(len(m.ord))
	}
	m.jobs[j.ID] = j.Clone()
	return nil
}

// Usage implements UsageStore.
func (m *MemStore) Usage(context.Context) (map[string]UserUse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]UserUse, len(m.use))
	for u, x := range m.use {
		out[u] = x
	}
	return out, nil
}
