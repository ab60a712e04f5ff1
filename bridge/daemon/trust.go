package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"time"

	"github.com/gridsub/gridsub/bridge/store"
	"github.com/gridsub/gridsub/policy"
)

// DefaultTrustHalfLife is how fast outcomes age for trust unless
// Options.TrustHalfLife says otherwise: a week.
const DefaultTrustHalfLife = 7 * 24 * time.Hour

// recomputeTrust is the trust task (SPEC.md §3): every configured site's
// trust as the broker sees it, from what the store counted — jobs that
// completed or failed there and outages the health probes found (one per
// outage, however long), older ones decayed (recent) —
// and the site's power (nodes / h) and measured bandwidth. The scores are
// stored with the decayed counts (GET /v1/sites shows them) and handed to
// the policy.
func (d *Daemon) recomputeTrust(ctx context.Context) error {
	recs, err := d.st.SiteHealth(ctx)
	if err != nil {
		return err
	}
	byName := map[string]store.SiteHealth{}
	for _, r := range recs {
		byName[r.Site] = r
	}
	tp := d.env.Broker.TrustPolicy()
	var nodes []policy.TrustNode
	out := map[policy.TrustKey]policy.Outcomes{}
	now := time.Now()
	rec := map[string]store.Recent{}
	for _, s := range d.env.Sites {
		r := byName[s.Name]
		n := policy.TrustNode{Name: s.Name, Power: power(s.Nodes, r.Nodes, s.H)}
		if r.Link != nil {
			n.Bandwidth = r.Link.BytesPerSec
		}
		nodes = append(nodes, n)
		c := recent(tp, r, now, d.opts.TrustHalfLife)
		rec[s.Name] = c
		out[policy.TrustKey{From: "", To: s.Name}] = policy.Outcomes{Completed: c.Completed, Failed: c.Failed, Unreachable: c.Outages}
	}
	scores, err := tp.Scores(&policy.TrustInput{Observer: policy.TrustNode{Name: ""}, Sites: nodes, Outcomes: out})
	if err != nil {
		return fmt.Errorf("trust policy %s: %w", tp.Name(), err)
	}
	for _, n := range nodes {
		v, ok := scores[n.Name]
		if !ok {
			continue
		}
		if err := d.st.SetTrustRecent(ctx, n.Name, v, rec[n.Name]); err != nil {
			return fmt.Errorf("storing the trust of %s: %w", n.Name, err)
		}
		d.m.siteTrust.WithLabelValues(n.Name).Set(v)
	}
	d.env.Broker.SetTrust(scores)
	lvl := slog.LevelDebug
	if trustMoved(d.trustLogged, scores) {
		lvl, d.trustLogged = slog.LevelInfo, maps.Clone(scores)
	}
	d.log.Log(ctx, lvl, "trust recomputed", "scores", fmt.Sprint(scores))
	return nil
}

// trustMoved says whether a site's trust moved by a hundredth or more since
// it was last logged (or a site came or went): the daemon's INFO log says
// when trust changes, not every time it is recomputed.
func trustMoved(last, now map[string]float64) bool {
	if len(last) != len(now) {
		return true
	}
	for k, v := range now {
		w, ok := last[k]
		if !ok || math.Abs(v-w) >= 0.01 {
			return true
		}
	}
	return false
}

// recent decays a site's outcome counts to now: the counts as the last
// recomputation left them, aged by the time since (the trust policy's
// Decay), plus the
// outcomes counted since. The first time (or when the raw counts went
// backwards: a store replaced) every outcome counted so far weighs fully.
func recent(tp policy.Trust, r store.SiteHealth, now time.Time, halfLife time.Duration) store.Recent {
	raw := store.Counts{Completed: r.Completed, Failed: r.Failed, Outages: r.Outages}
	var prev store.Recent
	if r.Recent != nil && r.Recent.Folded.Completed <= raw.Completed && r.Recent.Folded.Failed <= raw.Failed && r.Recent.Folded.Outages <= raw.Outages {
		prev = *r.Recent
	}
	age := time.Duration(0)
	if !prev.At.IsZero() {
		age = now.Sub(prev.At)
	}
	aged := tp.Decay(policy.Outcomes{Completed: prev.Completed, Failed: prev.Failed, Unreachable: prev.Outages}, age, halfLife)
	return store.Recent{
		Completed: aged.Completed + float64(raw.Completed-prev.Folded.Completed),
		Failed:    aged.Failed + float64(raw.Failed-prev.Folded.Failed),
		Outages:   aged.Unreachable + float64(raw.Outages-prev.Folded.Outages),
		At:        now,
		Folded:    raw,
	}
}

// power is a site's compute power for the trust comparison: its nodes
// (configured, else as last probed) over its heterogeneity factor h (a
// smaller h is a faster machine).
func power(configured, probed int, h float64) float64 {
	n := configured
	if n <= 0 {
		n = probed
	}
	if h <= 0 {
		h = 1
	}
	return float64(n) / h
}

// loadTrust hands the stored trust scores to the broker after a restart,
// so the policy does not start from "unset" until the next recomputation.
func (d *Daemon) loadTrust(ctx context.Context) error {
	recs, err := d.st.SiteHealth(ctx)
	if err != nil {
		return err
	}
	scores := map[string]float64{}
	for _, r := range recs {
		if r.Trust != nil {
			scores[r.Site] = *r.Trust
		}
	}
	d.env.Broker.SetTrust(scores)
	return nil
}
