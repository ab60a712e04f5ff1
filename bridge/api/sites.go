package api

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge/store"
)

// SiteReporter is optionally implemented by a Broker that records its
// sites' health (the daemon does, from its health probes kept in the
// store). Without it GET /v1/sites lists the names only.
//
// Contract: SiteStatus returns one Site per configured site, in
// configuration order (the order of SiteNames), from what was recorded —
// it does not contact the sites. It is safe for concurrent use.
type SiteReporter interface {
	SiteStatus(ctx context.Context) ([]Site, error)
}

// Site statuses (Site.Status starts with one of them).
const (
	SiteOK          = "ok"
	SiteUnreachable = "unreachable" // followed by ": <reason>"
	SiteNotProbed   = "not probed yet"
	// SiteNeedsLogin: the site's authenticated connection is gone and the
	// next needs a person (a one-time password): `gridsub login SITE`.
	// Not an outage: its jobs keep their state. Followed by ": <what to do>".
	SiteNeedsLogin = "needs login"
)

// Site is one site in GET /v1/sites: its configuration and what the last
// health probes recorded. Times are the daemon's wall clock. A field that
// was never measured is null in JSON: free_nodes, queued and running until
// the site first answered, the bandwidth and latency until a transfer was
// timed, trust until a trust policy computed it.
type Site struct {
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Nodes        int     `json:"nodes"`
	CoresPerNode int     `json:"cores_per_node"`
	H            float64 `json:"h"`
	// Status is "ok", "unreachable: <reason>" (the last probe failed),
	// "needs login: <what to do>" (SiteNeedsLogin) or "not probed yet".
	Status    string     `json:"status"`
	LastProbe *time.Time `json:"last_probe"`
	LastError string     `json:"last_error,omitempty"`
	// LastOK is the last probe the site answered; the load below is from
	// it, so after a failed probe it is the last known load.
	LastOK    *time.Time `json:"last_ok"`
	FreeNodes *int       `json:"free_nodes"`
	Queued    *int       `json:"queued"`
	Running   *int       `json:"running"`
	// Measured transfer cost (backends.LinkEstimator): seconds = latency +
	// bytes / bandwidth.
	BandwidthBytesPerSecond *float64   `json:"bandwidth_bytes_per_second"`
	LatencySeconds          *float64   `json:"latency_seconds"`
	LinkMeasuredAt          *time.Time `json:"link_measured_at"`
	// Trust as a trust policy last computed it (SPEC.md §3); null: not
	// computed.
	Trust           *float64   `json:"trust"`
	TrustComputedAt *time.Time `json:"trust_computed_at"`
	// Jobs that ended completed or failed with a component at the site.
	JobsCompleted int64 `json:"jobs_completed"`
	JobsFailed    int64 `json:"jobs_failed"`
	// Reliability is what the broker's availability model (paper 004's
	// Markov chain over times to failure) has learned of the site; null
	// when the broker runs none.
	Reliability *SiteReliability `json:"reliability"`
	// Commands is the account of the commands this daemon sent to the
	// site's batch system (null for a backend that does not count them:
	// simulated sites, plugins).
	Commands *SiteCommands `json:"scheduler_commands"`
}

// SiteCommands is one site's scheduler-command account (Site.Commands).
type SiteCommands struct {
	PerMinute float64 `json:"per_minute"`        // commands in the last minute
	Budget    float64 `json:"budget_per_minute"` // the steady-state budget
	Total     uint64  `json:"total"`             // since the daemon started
	Deferred  uint64  `json:"deferred"`          // routine polls not sent (not due, or no token)
	// BackoffUntil is set while the daemon backs off from the site after
	// an overload or rate-limit answer, with the site's words.
	BackoffUntil  *time.Time `json:"backoff_until"`
	BackoffReason string     `json:"backoff_reason,omitempty"`
}

// SiteReliability is the learned availability of a site (Site.Reliability).
// Times are the broker's clock (virtual on simulated sites).
type SiteReliability struct {
	// Up is the model's belief: false from the first failed status call
	// or health probe until the site answers again.
	Up bool `json:"up"`
	// Since is when the site last came up (or went down); null if never
	// observed.
	Since *time.Time `json:"since"`
	// States is the size of the learned chain (distinct time-to-failure
	// states); Failures the failures it learned them from; MTTFSeconds
	// their mean (0 with none).
	States      int     `json:"states"`
	Failures    int64   `json:"failures"`
	MTTFSeconds float64 `json:"mttf_seconds"`
	// R is the predicted probability that the site stays up for a job of
	// Horizon (a Go duration, "1h") starting now: 1 with no failure
	// seen, 0 while the site is down.
	Horizon string  `json:"horizon"`
	R       float64 `json:"r"`
}

// NewSite builds a Site from a configured site and the store's record of
// it (nil: none yet). nodes 0 (to be discovered) takes the site's own count
// from its last good probe.
func NewSite(name, kind string, nodes, coresPerNode int, h float64, rec *store.SiteHealth) Site {
	s := Site{Name: name, Kind: kind, Nodes: nodes, CoresPerNode: coresPerNode, H: h, Status: SiteNotProbed}
	if rec == nil {
		return s
	}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	s.LastProbe, s.LastOK, s.LastError = at(rec.LastProbe), at(rec.LastOK), rec.LastErr
	switch {
	case rec.LastProbe.IsZero():
	case strings.HasPrefix(rec.LastErr, SiteNeedsLogin+":"):
		s.Status = rec.LastErr
	case rec.LastErr != "":
		s.Status = SiteUnreachable + ": " + rec.LastErr
	default:
		s.Status = SiteOK
	}
	if !rec.LastOK.IsZero() {
		free, q, run := rec.FreeNodes, rec.Queued, rec.Running
		s.FreeNodes, s.Queued, s.Running = &free, &q, &run
		if s.Nodes == 0 {
			s.Nodes = rec.Nodes
		}
	}
	if rec.Link != nil {
		bw, lat := rec.Link.BytesPerSec, rec.Link.Latency.Seconds()
		s.BandwidthBytesPerSecond, s.LatencySeconds, s.LinkMeasuredAt = &bw, &lat, at(rec.LinkAt)
	}
	if rec.Trust != nil {
		v := *rec.Trust
		s.Trust, s.TrustComputedAt = &v, at(rec.TrustAt)
	}
	s.JobsCompleted, s.JobsFailed = rec.Completed, rec.Failed
	return s
}

// Summary is the reliability in one short phrase, the same for the CLI
// and the status page: "r(1h)=0.83 up, 2 states / 3 failures", "down, ..."
// or "-" without a model.
func (r *SiteReliability) Summary() string {
	if r == nil {
		return "-"
	}
	state := "up"
	if !r.Up {
		state = "down"
	}
	return fmt.Sprintf("r(%s)=%.2f %s, %d states / %d failures", r.Horizon, r.R, state, r.States, r.Failures)
}
