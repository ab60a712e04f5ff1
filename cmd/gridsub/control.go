package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func newHoldCmd(g *globals) *cobra.Command {
	return controlCmd(g, "hold", "Keep waiting jobs out of the queue until they are released",
		`Hold keeps each job out of the queue until "gridsub release": it is not placed
anywhere meanwhile, and once released it queues last (as after SLURM's
scontrol hold and release). Only a waiting job can be held (queued, or held
for its dependencies); a dispatched or running job is refused: requeue it
first. Exit status 1 when a job has already ended, 2 when one cannot be held.`,
		"  gridsub hold g000042\n  gridsub hold 42 43")
}

func newReleaseCmd(g *globals) *cobra.Command {
	return controlCmd(g, "release", "Release jobs held with gridsub hold",
		`Release ends a hold: the job is queued again in the next cycle, once its
dependencies (if it has any) are met. A job that was not held by the user is
refused (exit status 2).`,
		"  gridsub release g000042")
}

func newRequeueCmd(g *globals) *cobra.Command {
	return controlCmd(g, "requeue", "Stop running jobs and put them back in the queue",
		`Requeue stops each dispatched or running job at every site it was sent to
(its attempt is cancelled there) and puts it back in the queue, where the
broker places it again, perhaps at another site, as SLURM's scontrol requeue
does. Its attempts count on. A waiting job is refused (exit status 2); hold
and requeue together keep a running job from starting again.`,
		"  gridsub requeue g000042\n  gridsub requeue g000042 && gridsub hold g000042   # stop it, keep it")
}

// controlCmd is hold, release or requeue: the action on each job named,
// through the daemon (POST /v1/jobs/{id}/<action>).
func controlCmd(g *globals, action, short, long, example string) *cobra.Command {
	return &cobra.Command{
		Use:               action + " ID...",
		Short:             short,
		Long:              long + "\n\nJob ids may be shortened to a unique prefix or suffix. Needs a running daemon (gridsub serve).",
		Example:           example,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: jobIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			var out []jobJSON
			var first error
			failed := 0
			for _, id := range args {
				j, err := c.Control(cmd.Context(), id, action)
				if err != nil {
					fmt.Fprintf(g.stderr, "gridsub: %s %s: %s\n", action, id, sentence(err))
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
				return &exitError{ee.code, fmt.Errorf("%d of %d job(s) not %s", failed, len(args), pastTense(action))}
			}
			return nil
		},
	}
}

func pastTense(action string) string {
	if action == "hold" {
		return "held"
	}
	return action + "d"
}
