package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/bridge/jobfile"
	"github.com/gridsub/gridsub/frontend"
)

// followEvery is how often a client polls a job it follows.
const followEvery = 200 * time.Millisecond

// runRemoteSubmit hands a job file to the daemon. It prints the grid job id
// at once, or with --wait follows the job to its end like the embedded run.
func runRemoteSubmit(ctx context.Context, g *globals, f *submitFlags, c *daemonClient, path string) error {
	sites, err := c.Sites(ctx)
	if err != nil {
		return clientErr(err)
	}
	job, err := loadJob(path, sites)
	if err != nil {
		return usageErr(err)
	}
	f.addDeps(job)
	req, err := toRequest(job, c.now(ctx), "")
	if err != nil {
		return usageErr(err)
	}
	switch {
	case f.outDir != "" && !f.outDirSet:
		// The daemon's output root (broker.output_root) holds <job-id>/.
		req.OutputDir = daemon.IDPlaceholder
	case f.outDir != "":
		// Must lie inside the daemon's output root; the daemon refuses it otherwise.
		abs, err := filepath.Abs(f.outDir)
		if err != nil {
			return usageErr(fmt.Errorf("--out-dir: %w", err))
		}
		req.OutputDir = filepath.Join(abs, daemon.IDPlaceholder)
	}
	j, err := c.Submit(ctx, req)
	if err != nil {
		if f.outDirSet && errors.Is(err, bridge.ErrBadRequest) && strings.Contains(err.Error(), "OutputDir: ") {
			err = fmt.Errorf("%w\n  --out-dir must lie inside the daemon's output root (broker.output_root); without --out-dir the outputs go to <output_root>/<job-id>, and --embedded runs the job here", err)
		}
		return clientErr(err)
	}
	warnDeadline(g, j)
	if !f.wait {
		if g.json() {
			if err := writeJSON(g.stdout, toJSON(j, false)); err != nil {
				return err
			}
		} else {
			fmt.Fprintln(g.stdout, j.ID)
		}
		switch {
		case j.State == bridge.Rejected:
			// An advance reservation is admitted or refused at once.
			err := fmt.Errorf("job %s rejected: %s", j.ID, j.Reason)
			fmt.Fprintln(g.stderr, "gridsub:", err) // run does not print the errors of exit status 1
			return &exitError{exitJobFailed, err}
		case f.quiet || g.json():
		case j.State == bridge.Reserved:
			fmt.Fprintf(g.stderr, "gridsub: %s (%s): advance reservation admitted in the daemon at %s; a site is chosen shortly before %s (`gridsub reservations`, `gridsub watch %s`)\n",
				path, job.Name, c.where, stamp(j.Resv.Earliest, c.sim), j.ID)
		default:
			fmt.Fprintf(g.stderr, "gridsub: %s (%s) queued in the daemon at %s; follow it with `gridsub watch %s`\n", path, job.Name, c.where, j.ID)
		}
		return nil
	}
	if !f.quiet {
		fmt.Fprintf(g.stderr, "gridsub: %s (%s) is %s in the daemon at %s: %d node(s), walltime %s\n", path, job.Name, j.ID, c.where,
			job.Resources.Nodes, job.Resources.Walltime)
	}
	final, err := followRemote(ctx, g, f.quiet, c, j.ID, followEvery)
	if err != nil {
		return err
	}
	if !f.quiet && !g.json() {
		echoJobOutput(g, final) // the fetched files are on this machine when the daemon is (a unix socket)
	}
	return report(g, final, c.sim)
}

// jobIDs completes job ids from the daemon (unfinished jobs first).
func jobIDs(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		c, err := connect(ctx, g)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		js, _, err := c.List(ctx, bridge.Filter{Limit: api.MaxLimit})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, j := range js {
			if strings.HasPrefix(j.ID, prefix) {
				out = append(out, cobra.CompletionWithDesc(j.ID, j.Req.Name+" "+string(j.State)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func newStatusCmd(g *globals) *cobra.Command {
	snakemake := false
	c := &cobra.Command{
		Use:   "status [ID]",
		Short: "Show one job of the daemon (state, placement, times), or without ID who leads a shared store",
		Long: `Status shows a job the daemon knows: its state, where it runs, its wait and
run times and, while it is queued or running, a progress line. For an array,
sweep or pipeline it also shows how many elements ended, run and wait, and its
elements (every step of a pipeline; the unfinished and failed elements of an
array or sweep). --output json gives the same object as the end of "gridsub
job.yaml --output json", events included. Needs a running daemon (gridsub
serve).

Without ID it shows the service: for brokers sharing one PostgreSQL store
(store.shared), this broker's role, the leader, its fencing epoch and the
followers.`,
		Example:           "  gridsub status g000042\n  gridsub status g000042 -o json | jq .state\n  gridsub status            # who leads a shared store",
		Args:              cobra.RangeArgs(0, 1),
		ValidArgsFunction: jobIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return serviceStatus(cmd.Context(), g) // store_pg.go
			}
			if snakemake {
				return frontend.SnakemakeStatus(cmd.Context(), feEnv(g), args[0]) // fe_shims.go
			}
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			j, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return clientErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, toJSON(j, true))
			}
			fmt.Fprint(g.stdout, summaryText(j, c.sim))
			if j.Group != nil { // groups.go
				els, err := c.ListN(cmd.Context(), bridge.Filter{Parent: j.ID, Limit: api.MaxLimit}, 0)
				if err != nil {
					return clientErr(err)
				}
				fmt.Fprint(g.stdout, groupText(j, els))
			}
			if !j.State.Final() {
				fmt.Fprintf(g.stdout, "  %-10s %s\n", "progress", progressLine(j, c.now(cmd.Context())))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&snakemake, "snakemake", false, "print only running, success or failed, for Snakemake's --cluster-status; ID may be the integer sbatch printed; exit status 0 even when the daemon does not answer (then: running)")
	return c
}

// listFlags filter a list of jobs.
type listFlags struct {
	states []string
	site   string
	name   string
	parent string
	all    bool // list: every element of a group, not only its parent's row
	limit  int
}

func (f *listFlags) register(c *cobra.Command, limit int, limitHelp string) {
	fl := c.Flags()
	fl.StringSliceVar(&f.states, "state", nil, "only jobs in these states (repeat or comma-separate): "+bridge.StateNames())
	_ = c.RegisterFlagCompletionFunc("state", completeStates)
	fl.StringVar(&f.site, "site", "", "only jobs placed (in part) on this site")
	fl.StringVar(&f.name, "name", "", "only jobs with this name")
	fl.StringVar(&f.parent, "parent", "", "only the elements of this array, sweep or pipeline")
	fl.IntVar(&f.limit, "limit", limit, limitHelp)
}

func (f *listFlags) filter() (bridge.Filter, error) {
	if f.limit < 0 {
		return bridge.Filter{}, fmt.Errorf("--limit must be >= 0, got %d", f.limit)
	}
	flt := bridge.Filter{Site: f.site, Name: f.name, Parent: f.parent}
	for _, s := range f.states {
		st, err := parseStateFlag(s)
		if err != nil {
			return flt, err
		}
		flt.States = append(flt.States, st)
	}
	return flt, nil
}

// fetch returns the jobs a filter selects: the first limit (0 = all), or
// with last the last limit, in submission order. The last ones are asked
// for newest first and turned back: a page or two, however long the history.
func fetch(ctx context.Context, c *daemonClient, flt bridge.Filter, limit int, last bool) ([]*bridge.Job, error) {
	flt.Newest = last && limit > 0
	flt.Limit = api.MaxLimit
	if limit > 0 {
		flt.Limit = min(limit, api.MaxLimit)
	}
	js, err := c.ListN(ctx, flt, limit)
	if err != nil {
		return nil, err
	}
	if flt.Newest {
		slices.Reverse(js)
	}
	return js, nil
}

// printJobs prints jobs as a table (list: ended false; history: true) or
// JSON. now is the daemon's clock, for the elapsed time of a running job.
// Reasons are printed whole: a reason cut short hides what to do.
func printJobs(g *globals, js []*bridge.Job, ended, sim bool, now time.Time) error {
	if g.json() {
		out := make([]jobJSON, len(js))
		for i, j := range js {
			out[i] = toJSON(j, false)
		}
		return writeJSON(g.stdout, out)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	if ended {
		fmt.Fprintln(tw, "ID\tNAME\tSTATE\tNODES\tSITES\tSUBMITTED\tWAIT\tRUN\tTIME_LIMIT\tREASON")
	} else {
		fmt.Fprintln(tw, "ID\tNAME\tSTATE\tNODES\tSITES\tSUBMITTED\tELAPSED\tTIME_LIMIT\tATTEMPTS\tREASON")
	}
	for _, j := range js {
		sites := j.Sites()
		if sites == "" {
			sites = "-"
		}
		sub := stamp(j.Submit, sim)
		limit := "-"
		if j.Req.Estimate > 0 {
			limit = j.Req.Estimate.String()
		}
		if ended {
			wait, run := "-", "-"
			if !j.Start.IsZero() {
				wait = j.Start.Sub(j.Submit).Round(time.Second).String()
				if !j.End.IsZero() {
					run = j.End.Sub(j.Start).Round(time.Second).String()
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Req.Name, j.State, j.Req.Nodes, sites, sub, wait, run, limit, oneLine(j.Reason))
			continue
		}
		reason := j.Reason
		switch {
		case j.Group != nil && !j.State.Final():
			reason = j.Group.Kind + ": " + groupCounts(j.Group) // groups.go
		case j.State == bridge.Held:
			reason = j.Waiting
		case reason == "" && j.State == bridge.Queued:
			reason = lastMsg(j)
		}
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, j.Req.Name, j.State, j.Req.Nodes, sites, sub, elapsedText(j, now), limit, j.Attempts, oneLine(reason))
	}
	return tw.Flush()
}

// elapsedText is how long a job has run (until now, or its end), "-"
// before it started.
func elapsedText(j *bridge.Job, now time.Time) string {
	if j.Start.IsZero() {
		return "-"
	}
	end := now
	if !j.End.IsZero() {
		end = j.End
	}
	return max(end.Sub(j.Start), 0).Round(time.Second).String()
}

// lastMsg is the message of a job's latest event ("" without one): why a
// queued job waits, when its reason says nothing.
func lastMsg(j *bridge.Job) string {
	if n := len(j.Events); n > 0 {
		return j.Events[n-1].Msg
	}
	return ""
}

// oneLine keeps a reason on its row of the table.
func oneLine(s string) string {
	return strings.ReplaceAll(s, "\n", " ")
}

func newListCmd(g *globals) *cobra.Command {
	f := &listFlags{}
	c := &cobra.Command{
		Use:   "list",
		Short: "List the daemon's jobs, with filters",
		Long: `List shows the jobs the daemon knows, in submission order, filtered by
state, site and name. The elements of an array, sweep or pipeline listed with
their parent are folded into the parent's row, which counts them (--elements
lists them too; --parent ID lists one group's elements). --output json gives an
array of job objects, each with at least "id", "name", "state" and "sites".
Needs a running daemon (gridsub serve).`,
		Example: `  gridsub list
  gridsub list --state running,queued --site Beijing
  gridsub list --output json | jq -r '.[] | select(.state=="failed") | .id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flt, err := f.filter()
			if err != nil {
				return usageErr(err)
			}
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			if err := checkSiteFlag(cmd.Context(), c, flt.Site); err != nil {
				return err
			}
			js, err := fetch(cmd.Context(), c, flt, f.limit, false)
			if err != nil {
				return clientErr(err)
			}
			return printJobs(g, foldGroups(js, f.all || f.parent != ""), false, c.sim, c.now(cmd.Context()))
		},
	}
	f.register(c, 0, "at most this many jobs, the first in submission order (0 = all)")
	c.Flags().BoolVar(&f.all, "elements", false, "list the elements of arrays, sweeps and pipelines too (by default the parent's row stands for them)")
	return c
}

func newHistoryCmd(g *globals) *cobra.Command {
	f := &listFlags{}
	c := &cobra.Command{
		Use:   "history",
		Short: "List the daemon's ended jobs, the latest last",
		Long: `History lists jobs that ended (completed, failed, cancelled, rejected) with
their wait and run times: the last --limit of them in submission order.
--state narrows the final states. The daemon deletes jobs that ended longer
ago than its --keep-history. Needs a running daemon (gridsub serve).`,
		Example: "  gridsub history\n  gridsub history --state failed --limit 0 -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flt, err := f.filter()
			if err != nil {
				return usageErr(err)
			}
			final := []bridge.JobState{bridge.Completed, bridge.Failed, bridge.Timeout, bridge.Cancelled, bridge.Rejected}
			if len(flt.States) == 0 {
				flt.States = final
			}
			for _, s := range flt.States {
				if !slices.Contains(final, s) {
					return usageErr(fmt.Errorf("history lists ended jobs: --state %q is not a final state (completed, failed, timeout, cancelled, rejected); use `gridsub list --state %s`", s, s))
				}
			}
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			if err := checkSiteFlag(cmd.Context(), c, flt.Site); err != nil {
				return err
			}
			js, err := fetch(cmd.Context(), c, flt, f.limit, true)
			if err != nil {
				return clientErr(err)
			}
			return printJobs(g, js, true, c.sim, c.now(cmd.Context()))
		},
	}
	f.register(c, 20, "the last this many ended jobs (0 = all)")
	return c
}

func newWatchCmd(g *globals) *cobra.Command {
	var quiet bool
	c := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a job of the daemon until it ends",
		Long: `Watch shows a job's live progress on stderr until it ends, then prints its
summary (--output json: the job with its events) and exits with the job's
status: 0 completed, 1 failed, cancelled or rejected. Ctrl-C stops watching;
the job goes on. Needs a running daemon (gridsub serve).`,
		Example:           "  gridsub watch g000042",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			j, err := followRemote(cmd.Context(), g, quiet, c, args[0], followEvery)
			if err != nil {
				return err
			}
			return report(g, j, c.sim)
		},
	}
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr, only the summary")
	return c
}

func newEventsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "events ID",
		Short: "Show a job's history: every state change, dispatch and failure",
		Long: `Events prints a job's event history in order: submission, placement decisions,
remote submissions, state changes, retries, cancellations, output fetches.
Times are the broker's (virtual on simulated sites). Needs a running daemon.`,
		Example:           "  gridsub events g000042\n  gridsub events g000042 -o json",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			evs, err := c.Events(cmd.Context(), args[0])
			if err != nil {
				return clientErr(err)
			}
			if g.json() {
				if evs == nil {
					evs = []bridge.Event{}
				}
				return writeJSON(g.stdout, evs)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tKIND\tSITE\tMESSAGE")
			for _, e := range evs {
				site := e.Site
				if site == "" {
					site = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", stamp(e.Time, c.sim), e.Kind, site, e.Msg)
			}
			return tw.Flush()
		},
	}
}

func newCancelCmd(g *globals) *cobra.Command {
	var name, site string
	var states []string
	c := &cobra.Command{
		Use:   "cancel [ID...] [--name NAME] [--state STATE] [--site SITE]",
		Short: "Cancel jobs of the daemon at every site they were sent to",
		Long: `Cancel withdraws each job: from the queue if it waits, from every site it was
submitted to if it was dispatched. Cancelling an array, sweep or pipeline
cancels every element not yet ended and makes no more; a job held for a
cancelled job with afterok is cancelled with that reason. A job that already
ended is reported and left as it is (exit status 1).

Jobs are named by id (or a unique prefix or suffix of one), or chosen as
scancel chooses them: --name, --state and --site select every unfinished job
that matches them all (and, with ids, are added to them).`,
		Example: `  gridsub cancel g000042 g000043
  gridsub cancel --name sweep-lr         # every unfinished job of that name
  gridsub cancel --state queued,held     # everything still waiting
  gridsub cancel --state running --site Beijing`,
		ValidArgsFunction: jobIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			filtered := name != "" || len(states) > 0 || site != ""
			if len(args) == 0 && !filtered {
				return usageErr(fmt.Errorf("cancel needs job ids, or --name, --state or --site to choose the jobs"))
			}
			flt := bridge.Filter{Name: name, Site: site}
			for _, s := range states {
				st, err := parseStateFlag(s)
				if err != nil {
					return usageErr(err)
				}
				if st.Final() {
					return usageErr(fmt.Errorf("--state %s: a job that ended cannot be cancelled; choose among held, queued, reserved, submitting, dispatched, running", st))
				}
				flt.States = append(flt.States, st)
			}
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			if err := checkSiteFlag(cmd.Context(), c, site); err != nil {
				return err
			}
			ids := slices.Clone(args)
			if filtered {
				if len(flt.States) == 0 {
					for _, st := range bridge.States {
						if !st.Final() {
							flt.States = append(flt.States, st)
						}
					}
				}
				js, err := fetch(cmd.Context(), c, flt, 0, false)
				if err != nil {
					return clientErr(err)
				}
				for _, j := range foldGroups(js, false) { // a group's parent cancels its elements
					if !slices.Contains(ids, j.ID) {
						ids = append(ids, j.ID)
					}
				}
				if len(ids) == 0 {
					if !g.json() {
						fmt.Fprintln(g.stderr, "gridsub: no unfinished job matches; nothing cancelled")
					} else {
						return writeJSON(g.stdout, []jobJSON{})
					}
					return nil
				}
			}
			var out []jobJSON
			var first error
			failed := 0
			for _, id := range ids {
				j, err := c.Cancel(cmd.Context(), id)
				if err != nil {
					fmt.Fprintf(g.stderr, "gridsub: cancel %s: %s\n", id, sentence(err))
					failed++
					if first == nil {
						first = clientErr(err)
					}
					continue
				}
				out = append(out, toJSON(j, false))
				if !g.json() {
					fmt.Fprintf(g.stdout, "%s %s\n", j.ID, j.State)
				}
			}
			if g.json() {
				if out == nil {
					out = []jobJSON{}
				}
				if err := writeJSON(g.stdout, out); err != nil {
					return err
				}
			}
			var ee *exitError
			if errors.As(first, &ee) { // each failure is already on stderr
				return &exitError{ee.code, fmt.Errorf("%d of %d job(s) not cancelled", failed, len(ids))}
			}
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "cancel every unfinished job of this name")
	c.Flags().StringSliceVar(&states, "state", nil, "cancel every job in these states (comma-separated; held, queued, reserved, submitting, dispatched, running)")
	c.Flags().StringVar(&site, "site", "", "cancel every unfinished job placed (in part) on this site")
	return c
}

// parseStateFlag reads a --state value, with a did-you-mean for a typo.
func parseStateFlag(s string) (bridge.JobState, error) {
	st, err := bridge.ParseState(s)
	if err == nil {
		return st, nil
	}
	names := make([]string, len(bridge.States))
	for i, v := range bridge.States {
		names[i] = string(v)
	}
	msg := fmt.Sprintf("--state: no state %q", strings.TrimSpace(s))
	if sg := jobfile.Suggest(strings.TrimSpace(s), names); sg != "" {
		msg += fmt.Sprintf("; did you mean %q?", sg)
	}
	return "", fmt.Errorf("%s (valid: %s)", msg, strings.Join(names, ", "))
}

// checkSiteFlag refuses a --site the daemon does not have, with a
// did-you-mean: a filter on a misspelt site would silently match nothing.
func checkSiteFlag(ctx context.Context, c *daemonClient, site string) error {
	if site == "" {
		return nil
	}
	sites, err := c.Sites(ctx)
	if err != nil {
		return clientErr(err)
	}
	if slices.Contains(sites, site) {
		return nil
	}
	msg := fmt.Sprintf("--site: the daemon has no site %q", site)
	if sg := jobfile.Suggest(site, sites); sg != "" {
		msg += fmt.Sprintf("; did you mean %q?", sg)
	}
	return usageErr(fmt.Errorf("%s (sites: %s)", msg, strings.Join(sites, ", ")))
}
