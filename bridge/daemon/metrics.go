package daemon

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// metrics are the daemon's Prometheus metrics, on a registry of its own (so
// several daemons can run in one test process).
type metrics struct {
	reg          *prometheus.Registry
	cycleSeconds prometheus.Histogram
	cycles       *prometheus.CounterVec // result: ok, error
	started      prometheus.Counter
	ended        *prometheus.CounterVec // state
	dispatches   prometheus.Counter
	dispatchLat  prometheus.Histogram
	remoteSubmit *prometheus.CounterVec // site
	submissions  *prometheus.CounterVec // result: ok, rejected, error
	siteErrors   *prometheus.CounterVec // site, op
	siteUp       *prometheus.GaugeVec   // site
	siteFree     *prometheus.GaugeVec   // site
	siteTrust    *prometheus.GaugeVec   // site
	siteRate     *prometheus.GaugeVec   // site
	siteLatency  *prometheus.GaugeVec   // site
	skipped      *prometheus.CounterVec // task
	pruned       prometheus.Counter
	// plugins' supervision (plugins.go)
	pluginEvents     *prometheus.CounterVec // plugin, event
	plannerFallbacks prometheus.Counter
}

// countFunc counts the jobs in some states (read from the store at scrape
// time).
type countFunc func(ctx context.Context, states ...bridge.JobState) (int, error)

func newMetrics(count countFunc) *metrics {
	r := prometheus.NewRegistry()
	m := &metrics{reg: r,
		cycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gridsub_cycle_duration_seconds",
			Help: "Wall time of one broker cycle (poll, plan, dispatch).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gridsub_cycles_total",
			Help: "Broker cycles run, by result (ok: the cycle ran, per-site failures aside; error: it could not run)."}, []string{"result"}),
		started: prometheus.NewCounter(prometheus.CounterOpts{Name: "gridsub_jobs_started_total",
			Help: "Jobs the policy started (dispatched) in cycles."}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gridsub_jobs_ended_total",
			Help: "Jobs that reached a final state, by state."}, []string{"state"}),
		dispatches: prometheus.NewCounter(prometheus.CounterOpts{Name: "gridsub_dispatches_total",
			Help: "Dispatch attempts (a requeued job is dispatched again)."}),
		dispatchLat: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gridsub_dispatch_latency_seconds",
			Help:    "From a job's submission to its dispatch, in broker time (virtual time on simulated sites).",
			Buckets: prometheus.ExponentialBuckets(0.1, 4, 12)}),
		remoteSubmit: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gridsub_remote_submissions_total",
			Help: "Remote jobs submitted to a site's batch system."}, []string{"site"}),
		submissions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gridsub_api_submissions_total",
			Help: "Job submissions through the API, by result (ok, rejected: a bad request, error)."}, []string{"result"}),
		siteErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gridsub_site_errors_total",
			Help: "Failed calls to a site, by site and operation (status, info, health, submit-failed, cancel-failed, fetch-failed, reconcile-failed)."}, []string{"site", "op"}),
		siteUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gridsub_site_up",
			Help: "1 if the site's last health probe succeeded, 0 if it failed."}, []string{"site"}),
		siteFree: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gridsub_site_free_nodes",
			Help: "Free nodes the site reported at its last health probe."}, []string{"site"}),
		siteTrust: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gridsub_site_trust",
			Help: "The site's trust score as the trust task last computed it (SPEC.md §3), in (0,1]."}, []string{"site"}),
		siteRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gridsub_site_transfer_bytes_per_second",
			Help: "Transfer rate to the site measured on the staging transfers made so far (backends.LinkEstimator); absent until measured."}, []string{"site"}),
		siteLatency: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gridsub_site_transfer_latency_seconds",
			Help: "Per-transfer latency to the site measured on the staging transfers made so far; absent until measured."}, []string{"site"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gridsub_task_triggers_skipped_total",
			Help: "Schedule triggers dropped because the same task was still waiting to run."}, []string{"task"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "gridsub_history_pruned_total",
			Help: "Ended jobs deleted by the history cleanup."}),
		pluginEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gridsub_plugin_events_total",
			Help: "What the plugins' supervision did, by plugin (site or planner) and event (plugin-restarted, plugin-restart-failed, plugin-down, plugin-adopted, planner-restarted, planner-restart-failed, planner-fallback)."}, []string{"plugin", "event"}),
		plannerFallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "gridsub_planner_fallbacks_total",
			Help: "Times the planner plugin failed for good and the fallback built-in took over."}),
	}
	gauge := func(name, help string, states ...bridge.JobState) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			n, err := count(ctx, states...)
			if err != nil {
				return -1
			}
			return float64(n)
		})
	}
	r.MustRegister(m.cycleSeconds, m.cycles, m.started, m.ended, m.dispatches, m.dispatchLat, m.remoteSubmit,
		m.submissions, m.siteErrors, m.siteUp, m.siteFree, m.siteTrust, m.siteRate, m.siteLatency, m.skipped, m.pruned,
		m.pluginEvents, m.plannerFallbacks,
		gauge("gridsub_queue_length", "Jobs waiting in the broker's queue (queued), read from the store (-1 if it cannot be read).", bridge.Queued),
		gauge("gridsub_live_jobs", "Jobs submitted to sites and not ended (submitting, dispatched, running), read from the store.", bridge.Submitting, bridge.Dispatched, bridge.Running),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// onEvent counts what the broker's job events say. It runs on the goroutine
// that changed the job and must not call back into the broker.
func (m *metrics) onEvent(j *bridge.Job, e bridge.Event) {
	switch e.Kind {
	case "dispatch":
		m.dispatches.Inc()
		m.dispatchLat.Observe(max(0, e.Time.Sub(j.Submit).Seconds()))
	case "submitted-remote":
		m.remoteSubmit.WithLabelValues(e.Site).Inc()
	case "submit-failed", "cancel-failed", "fetch-failed", "reconcile-failed":
		m.siteErrors.WithLabelValues(e.Site, e.Kind).Inc()
	case "completed", "failed", "timeout", "cancelled", "rejected":
		m.ended.WithLabelValues(e.Kind).Inc()
	}
}

// cycle records one cycle's report.
func (m *metrics) cycle(d time.Duration, rep bridge.CycleReport, err error) {
	m.cycleSeconds.Observe(d.Seconds())
	if err != nil {
		m.cycles.WithLabelValues("error").Inc()
	} else {
		m.cycles.WithLabelValues("ok").Inc()
	}
	m.started.Add(float64(rep.Started))
	for _, e := range rep.Errors {
		// Per-site failures read "site <name>: <op>: ..." (bridge.Broker.poll
		// and snapshot); others name a job and are counted by their event.
		rest, ok := strings.CutPrefix(e.Error(), "site ")
		if !ok {
			continue
		}
		site, rest, ok := strings.Cut(rest, ": ")
		if !ok {
			continue
		}
		op, _, _ := strings.Cut(rest, ": ")
		m.siteErrors.WithLabelValues(site, op).Inc()
	}
}

// link records a site's measured transfer rate and latency, when the site
// measures them (backends.LinkEstimator) and has measured something.
func (m *metrics) link(site string, be backends.Backend) {
	l := measuredLink(be)
	if l == nil {
		return
	}
	m.siteRate.WithLabelValues(site).Set(l.BytesPerSec)
	m.siteLatency.WithLabelValues(site).Set(l.Latency.Seconds())
}

// measuredLink is the transfer cost the site's backend has measured so far
// (backends.LinkEstimator), or nil when it measures none or has not yet.
func measuredLink(be backends.Backend) *store.Link {
	le, ok := backends.AsLinkEstimator(be)
	if !ok {
		return nil
	}
	spb, lat, ok := le.LinkEstimate()
	if !ok || !(spb > 0) || math.IsInf(spb, 0) || lat < 0 {
		return nil
	}
	return &store.Link{BytesPerSec: 1 / spb, Latency: lat}
}
