package sshbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// The defaults of a site's command budget (BudgetConfig). They hold a
// site to DefaultPerMinute scheduler commands per minute at steady state,
// the order of what centres allow one user (Slurm's own rate limiter lets
// a user burst 30 and then 2 per second; centre rules often say one query
// a minute): at most one status poll every DefaultPollFast while a change
// is expected, one every DefaultPollSlow otherwise, and the capacity
// (sinfo/pbsnodes) every DefaultCapacityEvery.
const (
	DefaultPerMinute     = 6
	DefaultBurst         = 6
	DefaultPollFast      = 10 * time.Second
	DefaultPollSlow      = 20 * time.Second
	DefaultSettle        = 2 * time.Minute
	DefaultCapacityEvery = 2 * time.Minute
	DefaultBackoffMax    = time.Minute
)

// BudgetConfig is one site's scheduler-command budget (the site's
// `budget:` block). Zero fields take the defaults above.
type BudgetConfig struct {
	// PerMinute is the steady-state budget: scheduler commands per minute
	// (the token bucket's refill rate).
	PerMinute float64
	// Burst is the bucket's size: how many commands may go at once after
	// a quiet spell.
	Burst int
	// PollFast is the status poll interval soon after a submission, an
	// observed change or a job's expected end; PollSlow the interval when
	// nothing is expected to change. Neither is ever shorter than the
	// broker's cycle (broker.poll_interval): a poll happens in a cycle.
	PollFast, PollSlow time.Duration
	// Settle is how long polls stay fast after a submission or a change.
	Settle time.Duration
	// CapacityEvery is how often the capacity report (Info: sinfo and
	// squeue, or pbsnodes and qstat) is refreshed for the broker's routine
	// calls; between refreshes they get the last report.
	CapacityEvery time.Duration
	// BackoffMax caps the exponential back-off after an overload or
	// rate-limit answer (it starts at PollFast and doubles).
	BackoffMax time.Duration
}

// WithDefaults fills the zero fields.
func (c BudgetConfig) WithDefaults() BudgetConfig {
	if c.PerMinute <= 0 {
		c.PerMinute = DefaultPerMinute
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.PollFast <= 0 {
		c.PollFast = DefaultPollFast
	}
	if c.PollSlow <= 0 {
		c.PollSlow = max(DefaultPollSlow, c.PollFast)
	}
	if c.Settle <= 0 {
		c.Settle = DefaultSettle
	}
	if c.CapacityEvery <= 0 {
		c.CapacityEvery = DefaultCapacityEvery
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	return c
}

// Check reports a budget that cannot work, naming the field.
func (c BudgetConfig) Check() error {
	switch {
	case c.PerMinute < 0 || c.Burst < 0:
		return fmt.Errorf("budget.per_minute (%g) and budget.burst (%d) must be >= 0", c.PerMinute, c.Burst)
	case c.PollFast < 0 || c.PollSlow < 0 || c.Settle < 0 || c.CapacityEvery < 0 || c.BackoffMax < 0:
		return errors.New("budget durations must be >= 0")
	case c.PollFast > 0 && c.PollSlow > 0 && c.PollSlow < c.PollFast:
		return fmt.Errorf("budget.poll_slow (%s) must not be shorter than budget.poll_fast (%s)", c.PollSlow, c.PollFast)
	}
	return nil
}

// overloadRe is what batch systems say when they are overloaded, rate
// limiting, or not answering: Slurm's "Socket timed out on send/recv
// operation", "rate limit exceeded" (slurmctld's rl_enable), "Unable to
// contact slurm controller", "Resource temporarily unavailable"; PBS's
// connection refusals ("Connection refused", "cannot connect to server",
// pbs_errno 15010, "Server is busy").
var overloadRe = regexp.MustCompile(`(?i)rate limit|socket timed out|unable to contact|connection refused|cannot connect to server|temporarily unavailable|try again|server is busy|too many|communications connection failure|zero bytes were transmitted|slurm_receive_msg|15010`)

// Overloaded reports whether a batch command's words say its server is
// overloaded, rate limiting or not answering.
func Overloaded(msg string) bool { return overloadRe.MatchString(msg) }

// Budget is one site's scheduler-command budget: a token bucket that every
// scheduler command the site's Exec runs draws from, the count of those
// commands, and the exponential back-off after the site answers with an
// overload or rate-limit message (or not at all). Routine calls (status
// polls, capacity reports) wait for a token and for the back-off to end;
// everything else (submissions, cancels, lookups) is never held back, is
// counted, and takes no tokens (ChargeDemand). Routine calls may run the
// bucket Burst into debt. Safe for concurrent use.
type Budget struct {
	cfg BudgetConfig
	now func() time.Time
	log *slog.Logger
	// OnBackoff, when set, is told each time a back-off starts or grows:
	// until when routine calls wait, and the site's words.
	OnBackoff func(until time.Time, reason string)

	mu       sync.Mutex
	tokens   float64
	at       time.Time   // when tokens was last refilled
	recent   []time.Time // command times of the last minute, oldest first
	total    uint64
	deferred uint64
	backoff  time.Duration // current back-off step (0: none)
	until    time.Time     // routine calls wait until then
	reason   string
	login    bool // the back-off began with a command not sent for want of a login
}

// NewBudget makes a full budget; now nil means time.Now.
func NewBudget(cfg BudgetConfig, now func() time.Time, log *slog.Logger) *Budget {
	cfg = cfg.WithDefaults()
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Budget{cfg: cfg, now: now, log: log, tokens: float64(cfg.Burst), at: now()}
}

// Config is the budget's configuration, defaults filled.
func (b *Budget) Config() BudgetConfig { return b.cfg }

// refill adds the tokens earned since the last refill. b.mu held.
func (b *Budget) refill(now time.Time) {
	if dt := now.Sub(b.at); dt > 0 {
		b.tokens = min(float64(b.cfg.Burst), b.tokens+dt.Minutes()*b.cfg.PerMinute)
	}
	b.at = now
}

// Allow reports whether a routine call may go now: no back-off, and a
// whole token left. It takes nothing (the commands pay when they run);
// a routine call refused is counted as deferred. The error says why not:
// ErrDeferred for the bucket, ErrUnavailable for a back-off.
func (b *Budget) Allow() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if err := b.backingOff(now); err != nil {
		return err
	}
	b.refill(now)
	if b.tokens < 1 {
		b.deferred++
		return fmt.Errorf("%w: %.1f of %d commands left, %g a minute", backends.ErrDeferred, max(b.tokens, 0), b.cfg.Burst, b.cfg.PerMinute)
	}
	return nil
}

// BackingOff is Allow's back-off half: ErrUnavailable while routine calls
// wait for the back-off to end (counted as deferred), else nil.
func (b *Budget) BackingOff() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.backingOff(b.now())
}

func (b *Budget) backingOff(now time.Time) error {
	if now.Before(b.until) {
		b.deferred++
		if b.login { // still what the user must do: errors.Is(err, ErrNeedsLogin) holds
			return fmt.Errorf("%w: %w: backing off until %s after %q", backends.ErrUnavailable, backends.ErrNeedsLogin, b.until.UTC().Format(time.RFC3339), b.reason)
		}
		return fmt.Errorf("%w: backing off until %s after %q", backends.ErrUnavailable, b.until.UTC().Format(time.RFC3339), b.reason)
	}
	return nil
}

// Failing reports whether the site's last command went unanswered (or
// was turned away as overloaded) and none has answered since.
func (b *Budget) Failing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.backoff > 0
}

// Defer counts a routine call not sent for its own reason (its poll
// schedule).
func (b *Budget) Defer() {
	b.mu.Lock()
	b.deferred++
	b.mu.Unlock()
}

// Charge counts n commands a routine call sends now and takes their
// tokens (the bucket goes at most Burst into debt).
func (b *Budget) Charge(n int) { b.charge(n, false) }

// ChargeDemand counts n commands sent on demand (submissions, cancels,
// lookups). They take no tokens: what a user asks for is never held back,
// and a steady stream of submissions must not starve the polls that tell
// when those jobs end; the bucket holds the broker's own routine traffic.
func (b *Budget) ChargeDemand(n int) { b.charge(n, true) }

func (b *Budget) charge(n int, demand bool) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.refill(now)
	if !demand {
		b.tokens = max(b.tokens-float64(n), -float64(b.cfg.Burst))
	}
	b.total += uint64(n)
	for range n {
		b.recent = append(b.recent, now)
	}
	b.prune(now)
}

// prune drops command times older than a minute. b.mu held.
func (b *Budget) prune(now time.Time) {
	i := 0
	for i < len(b.recent) && now.Sub(b.recent[i]) >= time.Minute {
		i++
	}
	if i > 0 {
		b.recent = append(b.recent[:0], b.recent[i:]...)
	}
}

// Observe takes the outcome of one command: an overload answer (msg per
// Overloaded) or a Runner error other than the caller's own cancellation
// starts or doubles the back-off; any other answer ends it.
func (b *Budget) Observe(runErr error, msg string) {
	over := runErr != nil && !errors.Is(runErr, context.Canceled) || runErr == nil && msg != "" && Overloaded(msg)
	b.mu.Lock()
	if !over {
		if b.backoff > 0 {
			b.log.Info("site answers again; back-off over", "after", b.reason)
		}
		b.backoff, b.until, b.reason, b.login = 0, time.Time{}, "", false
		b.mu.Unlock()
		return
	}
	if b.backoff == 0 {
		b.backoff = b.cfg.PollFast
	} else {
		b.backoff = min(2*b.backoff, b.cfg.BackoffMax)
	}
	reason := msg
	if runErr != nil {
		reason = runErr.Error()
	}
	b.until, b.reason, b.login = b.now().Add(b.backoff), reason, errors.Is(runErr, backends.ErrNeedsLogin)
	until, step, cb := b.until, b.backoff, b.OnBackoff
	b.mu.Unlock()
	b.log.Warn("site overloaded or not answering; backing off", "for", step, "reason", reason)
	if cb != nil {
		cb(until, reason)
	}
}

// Stats is the account of the site's commands.
func (b *Budget) Stats() backends.CommandStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.prune(now)
	st := backends.CommandStats{Total: b.total, PerMinute: float64(len(b.recent)), Budget: b.cfg.PerMinute, Deferred: b.deferred}
	if now.Before(b.until) {
		st.BackoffUntil, st.BackoffReason = b.until, b.reason
	}
	return st
}
