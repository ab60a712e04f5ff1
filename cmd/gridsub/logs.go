package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
)

// logsEvery is how often `logs -f` asks for more output.
const logsEvery = 500 * time.Millisecond

func newLogsCmd(g *globals) *cobra.Command {
	var follow, stderr bool
	var part int
	c := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's output (stdout, or stderr with -e), -f to follow it while it runs",
		Long: `Logs prints what a job of the daemon wrote to its standard output (or, with
--stderr, its standard error) so far: while it runs, read from the site (over
SFTP from gridsub.out / gridsub.err in the job directory on SLURM sites; on
simulated sites from the site's buffer), and after it ended (from the site,
or from the fetched outputs). -f follows: it prints new output as it comes
and returns when the job has ended and all of it was printed (exit status 0;
Ctrl-C stops following with 130, the job goes on). A co-allocated job has one
output per part: --part chooses it. PBS copies a running job's output into
the job directory only when it ends.

The file names are the same on every backend: gridsub.out and gridsub.err,
in the remote job directory and among the fetched outputs
(<out-dir>/<job id>/). Needs a running daemon (gridsub serve).`,
		Example:           "  gridsub logs 000042\n  gridsub logs -f g000042\n  gridsub logs --stderr --part 1 g000042",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if part < 0 {
				return usageErr(fmt.Errorf("--part must be >= 0, got %d", part))
			}
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			stream := backends.StreamStdout
			if stderr {
				stream = backends.StreamStderr
			}
			if j, err := c.Job(cmd.Context(), args[0]); err == nil && j.Group != nil {
				if follow {
					return usageErr(fmt.Errorf("%s is %s %s: follow one of its elements (gridsub logs -f %s)", j.ID, article(j.Group.Kind), j.Group.Kind, j.ID+"_<index>"))
				}
				return printGroupLogs(cmd.Context(), g, c, j, stream, part)
			}
			return printLogs(cmd.Context(), g, c, args[0], stream, part, follow, logsEvery)
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the job ends")
	c.Flags().BoolVarP(&stderr, "stderr", "e", false, "the job's standard error instead of its standard output")
	c.Flags().IntVar(&part, "part", 0, "which part of a co-allocated job (0 = the first)")
	return c
}

// printLogs copies a job's stream to stdout from the start; with follow it
// polls until the job ended and the stream is printed to its end.
func printLogs(ctx context.Context, g *globals, c *daemonClient, id, stream string, part int, follow bool, every time.Duration) error {
	var off int64
	said := ""
	for {
		ch, err := c.Logs(ctx, id, stream, part, off, 0)
		if err != nil {
			if ctx.Err() != nil {
				return interrupted(id)
			}
			return clientErr(err)
		}
		id = ch.ID // a shortened id is resolved once
		if len(ch.Data) > 0 {
			if _, err := g.stdout.Write(ch.Data); err != nil {
				return &exitError{exitInternal, err}
			}
			off += int64(len(ch.Data))
			if off < ch.Size {
				continue // more is there already
			}
		}
		note := ""
		switch {
		case ch.Pending && !ch.State.Final():
			note = fmt.Sprintf("job %s is %s: no output yet", ch.ID, ch.State)
			if ch.Note != "" {
				note += " (" + ch.Note + ")"
			}
		case ch.Note != "" && len(ch.Data) == 0 && off == 0:
			note = ch.Note
		}
		if note != "" && note != said {
			fmt.Fprintln(g.stderr, "gridsub:", note)
			said = note
		}
		if !follow || (ch.State.Final() && off >= ch.Size) {
			return nil
		}
		select {
		case <-ctx.Done():
			return interrupted(id)
		case <-time.After(every):
		}
	}
}

// printGroupLogs prints the stream of every element of an array, sweep or
// pipeline that has one, each after a "==> ELEMENT <==" header (as tail
// prints several files); the elements not started yet are counted.
func printGroupLogs(ctx context.Context, g *globals, c *daemonClient, p *bridge.Job, stream string, part int) error {
	els, err := fetch(ctx, c, bridge.Filter{Parent: p.ID}, 0, false)
	if err != nil {
		return clientErr(err)
	}
	shown, waiting := 0, 0
	for _, e := range els {
		if e.Start.IsZero() && len(e.Comps) == 0 && len(e.Outputs) == 0 {
			waiting++
			continue
		}
		var buf bytes.Buffer
		sub := *g
		sub.stdout, sub.stderr = &buf, io.Discard
		if err := printLogs(ctx, &sub, c, e.ID, stream, part, false, logsEvery); err != nil || buf.Len() == 0 {
			continue
		}
		if shown > 0 {
			fmt.Fprintln(g.stdout)
		}
		fmt.Fprintf(g.stdout, "==> %s <==\n", e.ID)
		g.stdout.Write(buf.Bytes())
		shown++
	}
	notMade := 0
	if p.Group != nil {
		notMade = max(0, p.Group.Total-len(els))
	}
	if shown == 0 || waiting+notMade > 0 {
		fmt.Fprintf(g.stderr, "gridsub: %s %s: output of %d element(s) shown; %d not started yet, %d not made yet\n", p.Group.Kind, p.ID, shown, waiting, notMade)
	}
	return nil
}

// article is "a" or "an" before a word.
func article(w string) string {
	if w != "" && strings.ContainsRune("aeiou", rune(w[0])) {
		return "an"
	}
	return "a"
}

// interrupted is the error of Ctrl-C while following a daemon's job.
func interrupted(id string) error {
	return &exitError{exitInterrupted, fmt.Errorf("interrupted: stopped following %s; the job goes on in the daemon", id)}
}
