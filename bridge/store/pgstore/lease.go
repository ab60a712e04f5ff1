package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gridsub/gridsub/bridge/store"
)

// ErrFenced: a write of a broker that is no longer the leader (its lease
// expired or another broker took over with a higher epoch). Nothing of the
// write was committed. It wraps store.ErrUnavailable, so the broker treats
// it as a store it cannot write: it submits nothing on the strength of it.
var ErrFenced = fmt.Errorf("fenced: this broker is no longer the leader (%w)", store.ErrUnavailable)

// Leadership of several brokers sharing one database.
//
// One row (gridsub_leader) holds the leader's name, its epoch and when its
// lease expires. Campaign takes the row when the lease has expired (or
// was never taken), raising the epoch; the leader renews it well before it
// expires. Fencing: once Fence is set, every write transaction of the store
// first locks the row (FOR SHARE) and checks that it still names this
// broker with this epoch and an unexpired lease, in the same transaction
// as the write. A broker paused past its lease (SIGSTOP, a long GC, a
// partition) therefore cannot commit anything once it resumes — not a job,
// not a dispatch intent, so it cannot submit — and a takeover waits for a
// write in flight to commit first (the new leader's UPDATE conflicts with
// the share lock), so the new leader's Recover sees every write the old
// one made.
//
// Time is the server's (now(), clock_timestamp()), never a broker's clock.

// Lease is one broker's side of the leadership.
type Lease struct {
	s      *Postgres
	name   string
	ttl    time.Duration
	mu     sync.Mutex
	epoch  int64
	leader bool
}

// NewLease makes a broker's lease of the given name (unique among the
// brokers: a host name and the state directory, say) and time to live.
func (s *Postgres) NewLease(name string, ttl time.Duration) *Lease {
	return &Lease{s: s, name: name, ttl: ttl}
}

// Name is the broker's name.
func (l *Lease) Name() string { return l.name }

// TTL is the lease's time to live.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Epoch is the epoch of the last leadership this broker won (0: never).
func (l *Lease) Epoch() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// TryAcquire takes the lease if it is free or expired (or already this
// broker's, which renews it) and reports whether this broker now leads.
// Winning raises the epoch and sets the store's fence to it.
func (l *Lease) TryAcquire(ctx context.Context) (bool, error) {
	var epoch int64
	err := l.s.pool.QueryRow(ctx, `UPDATE gridsub_leader
		SET holder = $1, epoch = epoch + 1, expires = clock_timestamp() + $2 * interval '1 microsecond'
		WHERE id = 1 AND expires < clock_timestamp()
		RETURNING epoch`, l.name, l.ttl.Microseconds()).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, l.s.wrap("campaigning in", err)
	}
	l.mu.Lock()
	l.epoch, l.leader = epoch, true
	l.mu.Unlock()
	l.s.fence.Store(&fence{holder: l.name, epoch: epoch})
	return true, nil
}

// Campaign waits until this broker leads (polling every interval) or ctx
// ends.
func (l *Lease) Campaign(ctx context.Context, every time.Duration) error {
	for {
		ok, err := l.TryAcquire(ctx)
		if ok {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			l.s.log.Warn("campaigning for leadership", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// Renew extends the lease; it fails with ErrFenced when this broker no
// longer holds it (another took over, or it expired while this one was
// paused: a lease once expired is never renewed, it must be won again).
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	epoch := l.epoch
	l.mu.Unlock()
	tag, err := l.s.pool.Exec(ctx, `UPDATE gridsub_leader SET expires = clock_timestamp() + $3 * interval '1 microsecond'
		WHERE id = 1 AND holder = $1 AND epoch = $2 AND expires > clock_timestamp()`, l.name, epoch, l.ttl.Microseconds())
	if err != nil {
		return l.s.wrap("renewing the lease in", err)
	}
	if tag.RowsAffected() == 0 {
		l.mu.Lock()
		l.leader = false
		l.mu.Unlock()
		return fmt.Errorf("renewing the lease of epoch %d: %w", epoch, ErrFenced)
	}
	return nil
}

// Release gives the lease up (a clean shutdown), so a follower need not
// wait for it to expire.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	epoch := l.epoch
	l.leader = false
	l.mu.Unlock()
	_, err := l.s.pool.Exec(ctx, `UPDATE gridsub_leader SET expires = '-infinity' WHERE id = 1 AND holder = $1 AND epoch = $2`, l.name, epoch)
	return err
}

// Heartbeat records that this broker is alive (and where its API
// answers), for Status.
func (l *Lease) Heartbeat(ctx context.Context, address string) error {
	_, err := l.s.pool.Exec(ctx, `INSERT INTO gridsub_brokers(name, address, seen) VALUES ($1, $2, clock_timestamp())
		ON CONFLICT (name) DO UPDATE SET address = excluded.address, seen = excluded.seen`, l.name, address)
	return err
}

// Leadership is what the database says about the brokers.
type Leadership struct {
	Leader    string    `json:"leader"` // "" when the lease has expired
	Epoch     int64     `json:"epoch"`
	Expires   time.Time `json:"expires"`
	Followers []string  `json:"followers"` // brokers seen within 3 TTLs, the leader left out
}

// Status reads the leadership: the leader (if its lease holds), its epoch,
// and the other brokers that sent a heartbeat within the last three TTLs.
func (l *Lease) Status(ctx context.Context) (Leadership, error) {
	var st Leadership
	var holder string
	var live bool
	err := l.s.pool.QueryRow(ctx, `SELECT holder, epoch, expires, expires > clock_timestamp() FROM gridsub_leader WHERE id = 1`).Scan(&holder, &st.Epoch, &st.Expires, &live)
	if err != nil {
		return st, l.s.wrap("reading the leadership in", err)
	}
	if live {
		st.Leader = holder
	}
	rows, err := l.s.pool.Query(ctx, `SELECT name FROM gridsub_brokers WHERE seen > clock_timestamp() - $1 * interval '1 microsecond' ORDER BY name`, 3*l.ttl.Microseconds())
	if err != nil {
		return st, l.s.wrap("reading the brokers in", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return st, l.s.wrap("reading the brokers in", err)
	}
	for _, n := range names {
		if n != st.Leader {
			st.Followers = append(st.Followers, n)
		}
	}
	return st, nil
}

// fence is the leadership every write of a leader checks.
type fence struct {
	holder string
	epoch  int64
}

// checkFence runs in a write transaction of a leader: it locks the lease
// row for share and fails with ErrFenced unless the lease still names this
// broker and epoch and has not expired.
func (s *Postgres) checkFence(ctx context.Context, tx pgx.Tx) error {
	f := s.fence.Load()
	if f == nil {
		return nil
	}
	var ok bool
	err := tx.QueryRow(ctx, `SELECT holder = $1 AND epoch = $2 AND expires > clock_timestamp() FROM gridsub_leader WHERE id = 1 FOR SHARE`,
		f.holder, f.epoch).Scan(&ok)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("epoch %d of %s: %w", f.epoch, f.holder, ErrFenced)
	}
	return nil
}

// SetHandoff makes every new job this store writes also a handoff row, in
// the same transaction: a follower's submissions, for the leader to take
// (TakeHandoffs). Off by default.
func (s *Postgres) SetHandoff(on bool) { s.handoff.Store(on) }

// Handoffs returns the jobs followers handed to the leader, oldest first.
// Call DoneHandoffs with their ids once they are in the leader's queue.
func (s *Postgres) Handoffs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT h.id FROM handoff AS h JOIN jobs AS j ON j.id = h.id ORDER BY j.seq LIMIT 10000`)
	if err != nil {
		return nil, fmt.Errorf("store: handoffs: %w", s.wrap("reading", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: handoffs: %w", s.wrap("reading", err))
	}
	return ids, nil
}

// DoneHandoffs deletes the handoff rows of jobs the leader took (a fenced
// write, like every write of the leader).
func (s *Postgres) DoneHandoffs(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM handoff WHERE id = ANY($1)`, ids)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: handoffs: %w", s.wrap("writing to", err))
	}
	return nil
}
