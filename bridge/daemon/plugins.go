package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// plugins lists what serves each site's backend, then the planner plugin
// when there is one, then the policy plugins (broker.trust: plugin:...
// and the like) (GET /v1/plugins, `gridsub plugins`).
func (d *Daemon) plugins() []plugins.Listing {
	out := make([]plugins.Listing, 0, len(d.env.Sites)+1)
	for _, sp := range d.env.Sites {
		be, _ := d.env.Broker.Site(sp.Name)
		out = append(out, plugins.Describe(sp.Name, sp.Kind, be))
	}
	if l, ok := d.env.PlannerPlugin(); ok {
		out = append(out, l)
	}
	return append(out, d.env.PolicyPlugins()...)
}

// onPlugin is told what the plugins' supervision did (assemble.Options
// OnPlugin): a planner or policy plugin restarted or replaced by its
// fallback, a backend plugin restarted or down. It says so in the log (the planner's
// own restarts and switch are logged where they happen, by assemble) and
// counts it; it must not block.
func (d *Daemon) onPlugin(e assemble.PluginEvent) {
	d.m.pluginEvents.WithLabelValues(e.Plugin, e.Kind).Inc()
	switch e.Kind {
	case assemble.EventPlannerFallback:
		d.m.plannerFallbacks.Inc()
	case assemble.EventPlannerRestarted, assemble.EventPlannerRestartFailed:
	case assemble.EventPolicyRestarted, assemble.EventPolicyFallback: // logged by the policy plugin's client
	case "plugin-down":
		d.log.Error("backend plugin down: its site is down until gridsub is restarted", "plugin", e.Plugin, "site", e.Plugin, "event", e.Kind, "detail", e.Detail)
	default:
		d.log.Warn("backend plugin", "plugin", e.Plugin, "site", e.Plugin, "event", e.Kind, "detail", e.Detail)
	}
}

// pluginCollector reports each loaded plugin's health and restarts at
// scrape time, from the same listing as GET /v1/plugins, so the metrics
// and `gridsub plugins` never disagree.
type pluginCollector struct {
	list     func() []plugins.Listing
	up       *prometheus.Desc
	restarts *prometheus.Desc
	fallback *prometheus.Desc
}

func newPluginCollector(list func() []plugins.Listing) *pluginCollector {
	return &pluginCollector{list: list,
		up: prometheus.NewDesc("gridsub_plugin_up",
			"1 if the plugin serves (health ok, or in process), 0 while it restarts or once it is down or replaced by a fallback.", []string{"plugin", "kind", "mode"}, nil),
		restarts: prometheus.NewDesc("gridsub_plugin_restarts_total",
			"Restarts of the plugin's process after a crash or hang since the daemon started.", []string{"plugin", "kind"}, nil),
		fallback: prometheus.NewDesc("gridsub_planner_fallback_active",
			"1 if the planner plugin failed for good and its fallback built-in plans in its place.", []string{"plugin", "fallback"}, nil),
	}
}

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.restarts
	ch <- c.fallback
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.list() {
		up := 0.0
		if l.Health == "ok" {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, l.Name, l.Kind, l.Mode)
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(l.Restarts), l.Name, l.Kind)
		if l.Kind == plugins.KindPlanner {
			active := 0.0
			if l.FallbackActive {
				active = 1
			}
			ch <- prometheus.MustNewConstMetric(c.fallback, prometheus.GaugeValue, active, l.Name, l.Fallback)
		}
	}
}
