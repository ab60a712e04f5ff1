package daemon

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
)

// The learned site availability (paper 004's model, assemble's
// Env.Reliability): the health probes feed it beside the broker's status
// calls, it is saved to the store after every task that may have taught it
// something, and it is shown in GET /v1/sites and /metrics.

// observeProbe tells the model what a health probe found, on the broker's
// clock (virtual on simulated sites). Runs on the work goroutine.
func (d *Daemon) observeProbe(site string, ok bool) {
	if r := d.env.Reliability(); r != nil {
		r.Observe(site, ok, d.env.Now())
	}
}

// saveReliability stores the model when it changed. Runs on the work
// goroutine (and at shutdown, after it stopped).
func (d *Daemon) saveReliability(ctx context.Context) {
	if err := d.env.SaveReliability(ctx); err != nil {
		d.log.Error("saving the learned site reliability", "err", err)
	}
}

// siteReliability is the model's view of each site for GET /v1/sites, by
// name.
func (d *Daemon) siteReliability() map[string]*api.SiteReliability {
	out := map[string]*api.SiteReliability{}
	for _, r := range d.env.SitesReliability() {
		v := api.SiteReliability{Up: r.Up, States: r.States, Failures: r.Failures, MTTFSeconds: r.MTTF.Seconds(),
			Horizon: horizonLabel(), R: r.R}
		if !r.Since.IsZero() {
			t := r.Since
			v.Since = &t
		}
		out[r.Site] = &v
	}
	return out
}

// reliabilityCollector exports the model at scrape time:
// gridsub_site_reliability{site, horizon="1h"} and
// gridsub_site_failures_total{site}.
type reliabilityCollector struct {
	env           *assemble.Env
	rel, failures *prometheus.Desc
	horizonLabel  string
}

func newReliabilityCollector(env *assemble.Env) *reliabilityCollector {
	return &reliabilityCollector{env: env, horizonLabel: horizonLabel(),
		rel: prometheus.NewDesc("gridsub_site_reliability",
			"Predicted probability that the site stays up for a job of the horizon starting now (paper 004's Markov model, learned from the site's failures; 1 with none seen, 0 while it is down).",
			[]string{"site", "horizon"}, nil),
		failures: prometheus.NewDesc("gridsub_site_failures_total",
			"Failures of the site the availability model has learned (status calls or health probes that started failing, jobs or nodes lost), kept across restarts.",
			[]string{"site"}, nil)}
}

// horizonLabel is ReliabilityHorizon as a short label ("1h").
func horizonLabel() string {
	return strings.TrimSuffix(strings.TrimSuffix(assemble.ReliabilityHorizon.String(), "0s"), "0m")
}

func (c *reliabilityCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.rel; ch <- c.failures }

func (c *reliabilityCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.env.SitesReliability() {
		ch <- prometheus.MustNewConstMetric(c.rel, prometheus.GaugeValue, r.R, r.Site, c.horizonLabel)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(r.Failures), r.Site)
	}
}
