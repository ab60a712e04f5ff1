package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/assemble"
)

// commandsCollector exports each site's scheduler-command account
// (backends.CommandCounter; sites whose backend keeps none are left out).
type commandsCollector struct {
	env                            *assemble.Env
	total, perMinute, budget, back *prometheus.Desc
}

func newCommandsCollector(env *assemble.Env) *commandsCollector {
	return &commandsCollector{env: env,
		total: prometheus.NewDesc("gridsub_site_scheduler_commands_total",
			"Commands sent to the site's batch system (squeue, sinfo, sacct, sbatch…; each job of a batched submission counts).",
			[]string{"site"}, nil),
		perMinute: prometheus.NewDesc("gridsub_site_scheduler_commands_per_minute",
			"Commands sent to the site's batch system in the last minute.", []string{"site"}, nil),
		budget: prometheus.NewDesc("gridsub_site_scheduler_command_budget_per_minute",
			"The site's steady-state command budget (commands per minute).", []string{"site"}, nil),
		back: prometheus.NewDesc("gridsub_site_scheduler_backoff",
			"1 while gridsub backs off from the site after an overload or rate-limit answer (or none), else 0.", []string{"site"}, nil)}
}

func (c *commandsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.perMinute
	ch <- c.budget
	ch <- c.back
}

func (c *commandsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.env.Broker.SiteNames() {
		be, _ := c.env.Broker.Site(name)
		cc, ok := backends.AsCommandCounter(be)
		if !ok {
			continue
		}
		st := cc.CommandStats()
		back := 0.0
		if !st.BackoffUntil.IsZero() {
			back = 1
		}
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(st.Total), name)
		ch <- prometheus.MustNewConstMetric(c.perMinute, prometheus.GaugeValue, st.PerMinute, name)
		ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, st.Budget, name)
		ch <- prometheus.MustNewConstMetric(c.back, prometheus.GaugeValue, back, name)
	}
}
