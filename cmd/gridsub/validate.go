package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/batchscript"
	"github.com/gridsub/gridsub/bridge/jobfile"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
)

func newValidateCmd(g *globals) *cobra.Command {
	var offline bool
	c := &cobra.Command{
		Use:   "validate job.yaml...",
		Short: "Check job files without running them",
		Long: `Validate parses each job file and checks it against the configured sites
(--config, or the built-in local site; --config testbed for the examples). Every problem is reported with
the file, line and column, the field, and what would be valid. A valid file is
then checked for feasibility against the configured sites, as submission checks
it: a job too wide for the sites (or for one site with no_split), asking more
cores, memory or GPUs per node than any allowed site's nodes have, or with a
strict deadline the fastest placement cannot meet under the run-time model, can
never run (a best-effort one is valid, with a warning that it would run late).
Submission applies the same rule, with or without a daemon.

The configured batch sites (slurm, pbs) are asked for their partitions or
queues (at most 30 s; --offline asks nothing): a partition or queue a job's
site options name that its site does not have is an error naming the site,
the field and what the site has; a site whose own configured partition or
queue is missing is named too (an error when the job may run nowhere else,
else a warning). A site that does not answer is not judged. Exit status 0 when
every file is valid and feasible, 2 when one is invalid, else 1 when one can
never run.`,
		Example: `  gridsub validate examples/*.yaml
  gridsub validate --output json job.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return usageErr(err)
			}
			type result struct {
				File   string   `json:"file"`
				Valid  bool     `json:"valid"`
				Errors []string `json:"errors,omitempty"`
				// Infeasible: the file is valid, but no configured site can
				// ever run the job (bridge.Feasible); Errors says why.
				Infeasible bool `json:"infeasible,omitempty"`
				// Warning: the file is valid and feasible, but its
				// best-effort deadline cannot be met: it would run late.
				Warning string `json:"warning,omitempty"`
				// Warnings: a batch script's directives accepted without
				// effect, each with its line and why (fe_script.go).
				Warnings []string `json:"warnings,omitempty"`
			}
			var results []result
			bad, infeasible := 0, 0
			sites, now := configSites(cfg), time.Now()
			check, err := registry.Feasibility(cfg.Broker.Feasibility) // broker.feasibility, as submission checks
			if err != nil {
				return usageErr(err)
			}
			var probe *siteProbe
			if !offline {
				probe = probeSites(cmd.Context(), g, cfg)
			}
			for _, path := range args {
				r := result{File: path, Valid: true}
				job, warns, err := loadJobWarn(path, cfg.SiteNames())
				r.Warnings = warns
				if err == nil {
					var req bridge.Request
					if req, err = toRequest(job, now, ""); err == nil {
						err = probe.checkOptions(path, &req) // a partition or queue its site does not have
					}
					if err == nil && probe.misconfigured(&req, path, &r.Errors, &r.Warning) {
						infeasible++
						r.Valid, r.Infeasible = false, true
					} else if err == nil {
						m := &policy.Snapshot{Now: now, Sites: sites, Links: cfg.Links(), MultiSite: cfg.Network.MultiSiteFactor}
						w := r.Warning
						if r.Warning, err = bridge.FeasibleBy(check, &req, m); err != nil {
							infeasible++
							r.Valid, r.Infeasible = false, true
							r.Errors = []string{path + ": " + err.Error()}
							err = nil
						}
						r.Warning = joinWarnings(w, r.Warning)
					}
				}
				if err != nil {
					bad++
					r.Valid = false
					var list jobfile.ErrorList
					var serrs batchscript.Errors
					if errors.As(err, &serrs) {
						for _, e := range serrs {
							r.Errors = append(r.Errors, e.Error())
						}
					} else if errors.As(err, &list) {
						for _, e := range list {
							r.Errors = append(r.Errors, e.Error())
						}
					} else {
						r.Errors = []string{err.Error()}
					}
				}
				results = append(results, r)
			}
			if g.json() {
				if err := writeJSON(g.stdout, results); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					if r.Valid {
						fmt.Fprintf(g.stdout, "%s: ok\n", r.File)
						for _, w := range r.Warnings {
							fmt.Fprintf(g.stdout, "%s: warning: %s\n", r.File, w)
						}
						if r.Warning != "" {
							fmt.Fprintf(g.stdout, "%s: warning: %s\n", r.File, r.Warning)
						}
						continue
					}
					for _, e := range r.Errors {
						fmt.Fprintln(g.stdout, e)
					}
				}
			}
			if bad > 0 {
				return &exitError{exitUsage, fmt.Errorf("%d of %d job file(s) invalid", bad, len(args))}
			}
			if infeasible > 0 {
				return &exitError{exitJobFailed, fmt.Errorf("%d of %d job file(s) can never run on the configured sites", infeasible, len(args))}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&offline, "offline", false, "ask no site for its partitions or queues; check the files against the configuration only")
	return c
}
