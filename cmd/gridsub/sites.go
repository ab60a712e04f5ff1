package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/internal/config"
)

func newSitesCmd(g *globals) *cobra.Command {
	var offline, embedded bool
	c := &cobra.Command{
		Use:   "sites",
		Short: "List the sites with their health, load, trust and measured bandwidth",
		Long: `Sites lists every site with its health, load, trust and measured bandwidth.

With a daemon running (found as every command finds it: GRIDSUB_URL, else the
socket of GRIDSUB_SOCKET or broker.socket), it shows what the daemon recorded.
The daemon's health task probes every site on the schedule broker.cron.health
(default every minute) and stores each probe, so the records survive a
restart and a site that stops answering keeps its last known numbers:

  HEALTH      ok; unreachable (the last probe failed: the reason is printed
              under the table); not probed (none yet)
  LOAD        free nodes/queued jobs/running jobs at the last probe the site
              answered (after a failed probe, the last known load)
  TRUST       the site's trust score; "-" until a trust policy computes one
  BANDWIDTH   transfer rate and per-transfer latency measured on the staging
  LATENCY     transfers made so far; "-" until one was timed (simulated sites
              never are)
  DONE/FAILED jobs that ended completed/failed with a part at the site
  AVAIL       the availability model's belief: up, or down from the first
              failed status call or probe until the site answers again
  R(1h)       predicted probability that the site stays up for a 1-hour job
              starting now (paper 004's Markov model: 1 until a failure is
              seen, 0 while down)
  CHAIN       learned time-to-failure states / failures seen (a failure is
              the site starting to fail its status calls or probes, or a job
              or node lost there; docs/qos.md); kept across restarts
  LAST PROBE  how long ago the daemon last probed the site
  CMDS/MIN    commands the daemon sent to the site's batch system in the last
              minute / the site's budget (per site: budget.per_minute,
              default 6); "backoff" while the daemon backs off from the site
              after an overload or rate-limit answer (the reason is printed
              under the table); "-" for sites that do not count them

Without a daemon, or with --embedded, it contacts the sites itself from here
and shows what they report now: free nodes, queued and running jobs, or why a
site could not be reached. --offline contacts nothing and shows the
configuration only. Every form shows the kind, the size and the
heterogeneity factor h (run-time multiplier: 1 = the reference machine,
smaller is faster).

--output json prints the full records: from a daemon, every field of GET
/v1/sites (RFC 3339 times, null for what was never measured or computed).`,
		Example: `  gridsub sites                       # from the daemon if one answers, else probed from here
  gridsub sites --output json         # the full records, for scripts
  gridsub sites --embedded            # probe from here even though a daemon runs
  gridsub --config configs/local-slurm.yaml sites --offline`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if !offline && !embedded {
				c, err := connect(ctx, g)
				var ee *exitError
				switch {
				case err == nil:
					return daemonSites(ctx, g, c)
				case errors.As(err, &ee):
					return err
				case !errors.Is(err, errNoDaemon):
					return &exitError{exitInternal, fmt.Errorf("%w (--embedded probes the sites from here without the daemon)", err)}
				}
				// No daemon: probe from here, as --embedded does.
			}
			cfg, err := loadConfig(g)
			if err != nil {
				return usageErr(err)
			}
			rows, err := siteRows(ctx, g, cfg, offline)
			if err != nil {
				return err
			}
			if g.json() {
				return writeJSON(g.stdout, rows)
			}
			fmt.Fprintf(g.stdout, "configuration: %s\n", cfg.Source)
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tNODES\tFREE\tCORES/NODE\tH\tQUEUED\tRUNNING\tENDPOINT\tSTATUS")
			for _, r := range rows {
				free, q, run := "-", "-", "-"
				if r.Free != nil {
					free, q, run = fmt.Sprint(*r.Free), fmt.Sprint(r.Queued), fmt.Sprint(r.Running)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%.2f\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Nodes, free, r.CoresPerNode, r.H, q, run, r.Endpoint, r.Status)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&offline, "offline", false, "only show the configuration; contact neither the daemon nor the sites")
	c.Flags().BoolVar(&embedded, "embedded", false, "probe the sites from here even when a daemon runs")
	c.MarkFlagsMutuallyExclusive("offline", "embedded")
	return c
}

// daemonSites shows the daemon's records of its sites.
func daemonSites(ctx context.Context, g *globals, c *daemonClient) error {
	r, err := c.SiteStatus(ctx)
	if err != nil {
		return clientErr(err)
	}
	sites := r.Details
	if sites == nil {
		// A daemon from before site health lists names only.
		for _, n := range r.Sites {
			sites = append(sites, api.Site{Name: n, Status: "unknown: this daemon does not record site health (upgrade it, or use --embedded)"})
		}
	}
	if g.json() {
		if sites == nil {
			sites = []api.Site{}
		}
		return writeJSON(g.stdout, sites)
	}
	now := r.Time
	if now.IsZero() {
		now = time.Now()
	}
	fmt.Fprintf(g.stdout, "daemon: %s\n", c.where)
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tNODES\tH\tHEALTH\tLOAD\tTRUST\tBANDWIDTH\tLATENCY\tDONE/FAILED\tAVAIL\tR(1h)\tCHAIN\tLAST PROBE\tCMDS/MIN")
	var notes, unprobed []string
	for _, s := range sites {
		health, load := siteHealthWord(s.Status), "-"
		if s.FreeNodes != nil && s.Queued != nil && s.Running != nil {
			load = fmt.Sprintf("%d/%d/%d", *s.FreeNodes, *s.Queued, *s.Running)
		}
		trust, bw, lat := "-", "-", "-"
		if s.Trust != nil {
			trust = fmt.Sprintf("%.3g", *s.Trust)
		}
		if s.BandwidthBytesPerSecond != nil {
			bw = humanRate(*s.BandwidthBytesPerSecond)
		}
		if s.LatencySeconds != nil {
			lat = humanLatency(*s.LatencySeconds)
		}
		probe := "never"
		if s.LastProbe != nil {
			probe = ago(now.Sub(*s.LastProbe))
		}
		avail, r, chain := siteReliabilityCols(s.Reliability)
		cmds := "-"
		if c := s.Commands; c != nil {
			cmds = fmt.Sprintf("%g/%g", c.PerMinute, c.Budget)
			if c.BackoffUntil != nil {
				cmds += " backoff"
				notes = append(notes, fmt.Sprintf("%s: backing off until %s after %q", s.Name, c.BackoffUntil.Format(time.RFC3339), c.BackoffReason))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, s.Nodes, s.H, health, load,
			trust, bw, lat, s.JobsCompleted, s.JobsFailed, avail, r, chain, probe, cmds)
		switch {
		case health == "unreachable":
			last := "it never answered"
			if s.LastOK != nil {
				last = "load as of the last answer, " + ago(now.Sub(*s.LastOK))
			}
			notes = append(notes, fmt.Sprintf("%s: %s (%s)", s.Name, folded(s.Status), last))
		case health == "not probed":
			unprobed = append(unprobed, s.Name)
		case health != "ok":
			notes = append(notes, fmt.Sprintf("%s: %s", s.Name, s.Status))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(g.stdout, n)
	}
	if len(unprobed) > 0 {
		fmt.Fprintf(g.stdout, "not probed yet: %s (the daemon probes on its broker.cron.health schedule, every minute by default)\n", strings.Join(unprobed, ", "))
	}
	return nil
}

// siteReliabilityCols are the AVAIL, R(1h) and CHAIN columns ("-" from a
// daemon without an availability model).
func siteReliabilityCols(r *api.SiteReliability) (avail, rel, chain string) {
	if r == nil {
		return "-", "-", "-"
	}
	avail = "up"
	if !r.Up {
		avail = "down"
	}
	return avail, fmt.Sprintf("%.2f", r.R), fmt.Sprintf("%d/%d", r.States, r.Failures)
}

// siteHealthWord is the HEALTH column for a site status.
func siteHealthWord(status string) string {
	switch {
	case status == api.SiteOK:
		return "ok"
	case status == api.SiteNotProbed:
		return "not probed"
	case strings.HasPrefix(status, api.SiteUnreachable):
		return "unreachable"
	case strings.HasPrefix(status, api.SiteNeedsLogin):
		return "needs login"
	}
	return "unknown"
}

// folded puts a multi-line error on one line.
func folded(s string) string { return strings.Join(strings.Fields(s), " ") }

// humanRate formats bytes per second in SI units ("1.2 MB/s").
func humanRate(bps float64) string {
	units := []string{"B/s", "kB/s", "MB/s", "GB/s", "TB/s"}
	i := 0
	for bps >= 999.5 && i < len(units)-1 {
		bps /= 1000
		i++
	}
	if bps < 9.95 {
		return fmt.Sprintf("%.1f %s", bps, units[i])
	}
	return fmt.Sprintf("%.0f %s", bps, units[i])
}

// humanLatency formats seconds as a short duration ("575ms", "1.2s").
func humanLatency(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 10*time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// ago formats an age ("just now", "42s ago", "5m ago", "3h ago", "2d ago").
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

type siteRow struct {
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Nodes        int     `json:"nodes"`
	CoresPerNode int     `json:"cores_per_node"`
	H            float64 `json:"h"`
	Endpoint     string  `json:"endpoint,omitempty"`
	Free         *int    `json:"free_nodes,omitempty"`
	Queued       int     `json:"queued"`
	Running      int     `json:"running"`
	Status       string  `json:"status"`
}

func siteRows(ctx context.Context, g *globals, cfg *config.Config, offline bool) ([]siteRow, error) {
	rows := make([]siteRow, len(cfg.Sites))
	for i, s := range cfg.Sites {
		rows[i] = siteRow{Name: s.Name, Kind: s.Kind, Nodes: s.Nodes, CoresPerNode: s.CoresPerNode, H: s.H, Status: "not contacted"}
		if s.SSH != nil {
			rows[i].Endpoint = fmt.Sprintf("%s@%s:%d", s.SSH.User, s.SSH.Host, s.SSH.Port)
		}
	}
	if offline {
		return rows, nil
	}
	spec, err := specFromConfig(cfg, g.logger())
	if err != nil {
		return nil, usageErr(err)
	}
	promptOnTerminal(&spec, g)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	env, err := assemble.Build(ctx, spec, assemble.Options{Logger: g.logger()})
	if err != nil {
		// Say which site failed, but still list the configuration.
		for i := range rows {
			rows[i].Status = "unreachable: " + err.Error()
		}
		return rows, nil
	}
	defer env.Close()
	for i := range rows {
		be, _ := env.Broker.Site(rows[i].Name)
		info, err := be.Info(ctx)
		if err != nil {
			rows[i].Status = "error: " + err.Error()
			continue
		}
		free := info.FreeNodes
		rows[i].Free, rows[i].Queued, rows[i].Running, rows[i].Status = &free, info.Queued, info.Running, "ok"
		if rows[i].Nodes == 0 {
			rows[i].Nodes = info.Nodes
		}
		if info.CoresPerNode > 0 {
			rows[i].CoresPerNode = info.CoresPerNode
		}
	}
	return rows, nil
}
