package sshsite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// TestRateLimitBackoff: a site that answers with its rate-limit or
// overload words (SLURM's "RPC rate limit exceeded", PBS's connection
// refusal) is backed off from exponentially — the routine polls in
// between are not sent at all — and, once it answers again, polled as
// before with the back-off over.
func TestRateLimitBackoff(t *testing.T) {
	for _, dialect := range []string{SLURM, PBS} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			s := startSite(t, dialect, 2, 1, 1)
			ctx := context.Background()
			bud := sshbatch.BudgetConfig{PollFast: time.Second, PollSlow: time.Second, BackoffMax: 4 * time.Second, PerMinute: 600, Burst: 20}
			tc := s.Transport(s.key, s.known)
			rd := filepath.Join(s.home, "gridsub-test")
			var b *sshbatch.Backend
			id := backends.JobID("1")
			cmd := "squeue"
			if dialect == SLURM {
				sb, err := slurm.Connect(ctx, slurm.Config{Name: s.cfg.Name, RemoteDir: rd, User: s.cfg.User, JobCompFile: "-", Budget: bud}, tc)
				if err != nil {
					t.Fatal(err)
				}
				b = sb.Backend
			} else {
				pb, err := pbs.Connect(ctx, pbs.Config{Name: s.cfg.Name, RemoteDir: rd, User: s.cfg.User, BinDir: s.bin, Location: time.Local, Budget: bud}, tc)
				if err != nil {
					t.Fatal(err)
				}
				b, id, cmd = pb, backends.JobID("1."+s.cfg.Name), "qstat"
			}
			defer b.Close()
			rctx := backends.Routine(ctx)
			sent := func() int64 { return s.Stats().Batch[cmd] }

			s.RateLimit(true)
			if _, err := b.Status(rctx, []backends.JobID{id}); !errors.Is(err, backends.ErrUnavailable) {
				t.Fatalf("a rate-limited poll: %v, want ErrUnavailable", err)
			}
			st := b.CommandStats()
			if st.BackoffUntil.IsZero() || !strings.Contains(strings.ToLower(st.BackoffReason), map[string]string{SLURM: "rate limit", PBS: "connection refused"}[dialect]) {
				t.Fatalf("no back-off after the site's overload answer: %+v", st)
			}
			first := st.BackoffUntil
			// Polls during the back-off are not sent.
			n := sent()
			for range 3 {
				if _, err := b.Status(rctx, []backends.JobID{id}); !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "backing off") {
					t.Fatalf("a poll during the back-off: %v", err)
				}
			}
			if sent() != n {
				t.Fatalf("%d %s sent during the back-off", sent()-n, cmd)
			}
			// Still refused after the back-off: it doubles.
			time.Sleep(time.Until(first) + 50*time.Millisecond)
			if _, err := b.Status(rctx, []backends.JobID{id}); err == nil {
				t.Fatal("the site still refuses, yet the poll succeeded")
			}
			if st = b.CommandStats(); !st.BackoffUntil.After(first.Add(1500 * time.Millisecond)) {
				t.Fatalf("back-off did not grow: first until %s, then %s", first.Format(time.StampMilli), st.BackoffUntil.Format(time.StampMilli))
			}
			// The site recovers: the next poll due goes out and succeeds.
			s.RateLimit(false)
			time.Sleep(time.Until(st.BackoffUntil) + 50*time.Millisecond)
			var err error
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
				if _, err = b.Status(rctx, []backends.JobID{id}); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("no recovery after the site stopped refusing: %v", err)
			}
			if st = b.CommandStats(); !st.BackoffUntil.IsZero() {
				t.Fatalf("still backing off after an answer: %+v", st)
			}
		})
	}
}
