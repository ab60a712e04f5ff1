package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newReservationsCmd(g *globals) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "reservations",
		Short: "List the daemon's advance reservations and where each stands",
		Long: `Reservations lists the advance reservations of jobs that asked for a window
(scheduling.reservation in the job file), earliest window first.

A job with a window is admitted or refused the moment it is submitted: the
broker runs the admission test of the dynamic reservation mechanism (DRRM,
SPEC.md §2) over the sites, and books nothing yet. Shortly before the window
opens its reservation_binding task picks the site with the state of that
moment (starting later within the window's slack rather than restarting
other grid jobs, when it can), creates the site's native reservation
(scontrol create reservation on SLURM) and submits the job into it.

  STATE   admitted  passed the admission test; no site chosen yet
          binding   the native reservation is being made at SITE
          bound     the native reservation exists at SITE from START
          released  the job ended; the native reservation was deleted
          failed    refused, or dropped when a site failed (REASON says why)

By default the ones not yet ended are listed; --all lists every stored one.
Needs a running daemon (gridsub serve).`,
		Example: `  gridsub examples/reservation.yaml        # with a daemon: admitted or refused at once
  gridsub reservations
  gridsub reservations --all --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			rs, err := cl.Reservations(cmd.Context(), !all)
			if err != nil {
				return clientErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, rs)
			}
			if len(rs) == 0 {
				fmt.Fprintln(g.stdout, "no reservations")
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tSTATE\tNODES\tWINDOW\tSITE\tSTART\tREASON")
			for _, r := range rs {
				site, start := "-", "-"
				if r.Site != "" {
					site = r.Site
				}
				if r.Start != nil {
					start = stamp(*r.Start, cl.sim)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s .. %s\t%s\t%s\t%s\n", r.Job, r.State, r.Nodes,
					stamp(r.Earliest, cl.sim), stamp(r.Latest, cl.sim), site, start, r.Reason)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&all, "all", false, "also the released and failed ones")
	return c
}
