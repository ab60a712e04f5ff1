package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/assemble"
)

func newExplainCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "explain ID",
		Short: "Show where the daemon would place a queued job now, and why",
		Long: `Explain asks the daemon's planner where a queued job would go if it were
planned now: the chosen placement with its predicted start and end, the
alternatives it beat, the sites the job cannot use (not allowed, down, nodes
without the cores, memory or GPUs it asks, or a site that refused it before)
and the planner's reasons. Nothing changes. --output json gives the same as
the API's GET /v1/jobs/{id}/explain. For a job file not submitted yet, use
"gridsub submit --dry-run job.yaml". Needs a running daemon (gridsub serve).`,
		Example:           "  gridsub explain g000042\n  gridsub explain g000042 -o json | jq .excluded",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			e, err := c.ExplainJob(cmd.Context(), args[0])
			if err != nil {
				return clientErr(err)
			}
			return printExplanation(g, e)
		},
	}
}

// runDryRun is `gridsub submit --dry-run`: the job file is checked as a
// submission is (the daemon's, or an embedded broker's when none runs),
// and the placement it would get now is printed; nothing is submitted.
func runDryRun(ctx context.Context, g *globals, f *submitFlags, path string) error {
	if !f.embedded {
		c, err := connect(ctx, g)
		var ee *exitError
		switch {
		case err == nil:
			sites, err := c.Sites(ctx)
			if err != nil {
				return clientErr(err)
			}
			job, err := loadJob(path, sites)
			if err != nil {
				return usageErr(err)
			}
			req, err := toRequest(job, c.now(ctx), "")
			if err != nil {
				return usageErr(err)
			}
			e, err := c.Explain(ctx, req)
			if err != nil {
				return clientErr(err)
			}
			return printExplanation(g, e)
		case errors.As(err, &ee):
			return err
		case !errors.Is(err, errNoDaemon):
			return &exitError{exitInternal, fmt.Errorf("%w (--embedded explains without the daemon)", err)}
		}
	}
	cfg, job, spec, err := embeddedSetup(g, path, "")
	if err != nil {
		return usageErr(err)
	}
	env, err := assemble.Build(ctx, spec, assemble.Options{Logger: g.logger()})
	if err != nil {
		return &exitError{exitInternal, siteAdvice(err, cfg.Source)}
	}
	defer env.Close()
	if err := reachable(g, env, cfg.Source); err != nil {
		return &exitError{exitInternal, err}
	}
	now := env.Now()
	req, err := toRequest(job, now, "")
	if err != nil {
		return usageErr(err)
	}
	e, err := env.Broker.Explain(ctx, req, now)
	if err != nil {
		return clientErr(err)
	}
	return printExplanation(g, e)
}

// printExplanation prints e (JSON with --output json). A job the planner
// would reject ends with exit status 1, as its submission would.
func printExplanation(g *globals, e *bridge.Explanation) error {
	if g.json() {
		if err := writeJSON(g.stdout, e); err != nil {
			return err
		}
	} else {
		fmt.Fprint(g.stdout, explanationText(e))
	}
	if e.Action == "reject" {
		return &exitError{exitJobFailed, fmt.Errorf("job %s would be rejected: %s", e.Job, strings.Join(e.Reasons, "; "))}
	}
	return nil
}

// explanationText renders an explanation for people.
func explanationText(e *bridge.Explanation) string {
	var sb strings.Builder
	what := "job " + e.Job
	if e.Job == bridge.DryRunID {
		what = "dry run (nothing submitted)"
	}
	fmt.Fprintf(&sb, "%s, planned by %s at %s:\n", what, e.Planner, e.Time.Format(time.RFC3339))
	place := func(p *bridge.Placement) string {
		var parts []string
		for _, x := range p.Parts {
			parts = append(parts, fmt.Sprintf("%s:%d", x.Site, x.Nodes))
		}
		s := fmt.Sprintf("%-28s start %s, end %s (run %s", strings.Join(parts, "+"), rel(p.Start, e.Time), rel(p.End, e.Time), p.Runtime.Round(time.Second))
		if p.Transfer > 0 {
			s += fmt.Sprintf(" + transfer %s", roundDur(p.Transfer))
		}
		s += ")"
		if p.Immediate {
			s += ", could start now"
		}
		return s
	}
	switch e.Action {
	case "start", "replicate":
		fmt.Fprintf(&sb, "  %-12s %s\n", "would "+e.Action, place(e.Chosen))
	case "reserve":
		fmt.Fprintf(&sb, "  %-12s %s\n", "would wait", place(e.Chosen))
	case "reject":
		fmt.Fprintf(&sb, "  %-12s the job can never run here\n", "would reject")
	default:
		fmt.Fprintf(&sb, "  %-12s no placement this pass\n", "would wait")
	}
	if len(e.Alternatives) > 0 {
		sb.WriteString("  alternatives it beat:\n")
		for i := range e.Alternatives {
			fmt.Fprintf(&sb, "    %s\n", place(&e.Alternatives[i]))
		}
	}
	if e.Data != "" {
		fmt.Fprintf(&sb, "  %s\n", e.Data)
	}
	if len(e.Excluded) > 0 {
		sb.WriteString("  not eligible:\n")
		for _, x := range e.Excluded {
			fmt.Fprintf(&sb, "    %s: %s\n", x.Site, x.Why)
		}
	}
	if len(e.Reasons) > 0 {
		sb.WriteString("  reasons:\n")
		for _, r := range e.Reasons {
			fmt.Fprintf(&sb, "    - %s\n", r)
		}
	}
	return sb.String()
}
