package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/internal/jobfile"
)

func newValidateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate job.yaml...",
		Short: "Check job files without running them",
		Long: `Validate parses each job file and checks it against the configured sites
(--config, or the built-in simulated testbed). Every problem is reported with
the file, line and column, the field, and what would be valid. Exit status 0
when every file is valid, 2 otherwise.`,
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
			}
			var results []result
			bad := 0
			for _, path := range args {
				r := result{File: path, Valid: true}
				if _, err := loadJob(path, cfg.SiteNames()); err != nil {
					bad++
					r.Valid = false
					var list jobfile.ErrorList
					if errors.As(err, &list) {
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
			return nil
		},
	}
}
