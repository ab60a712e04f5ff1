package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge"
)

func newOutputCmd(g *globals) *cobra.Command {
	var cat bool
	c := &cobra.Command{
		Use:   "output ID",
		Short: "Show where a job's outputs were fetched to, or print them",
		Long: `Output lists the files the daemon brought back for an ended job: into
<out-dir>/<job id>/ of the submission (--out-dir, default gridsub-out), one
subdirectory per site for a co-allocated job. --cat prints their contents to
stdout, each after a header line "==> PATH <==" (as tail prints several
files). The job's standard output and error are gridsub.out and gridsub.err
on every backend. The paths are on the daemon's machine (the same one for a unix socket).
Files that could not be fetched are listed with the reason (exit status 1).`,
		Example:           "  gridsub output g000042\n  gridsub output g000042 --cat",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobIDs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			j, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return clientErr(err)
			}
			if j.Group != nil {
				// An array's, sweep's or pipeline's outputs are its
				// elements': those that ended so far.
				els, err := fetch(cmd.Context(), c, bridge.Filter{Parent: j.ID}, 0, false)
				if err != nil {
					return clientErr(err)
				}
				g2 := *j
				j = &g2
				j.Outputs, j.FetchErrors = nil, nil
				for _, e := range els {
					j.Outputs = append(j.Outputs, e.Outputs...)
					for _, fe := range e.FetchErrors {
						j.FetchErrors = append(j.FetchErrors, e.ID+": "+fe)
					}
				}
				if !j.State.Final() && len(j.Outputs) == 0 {
					err := fmt.Errorf("%s %s is %s: none of its elements has outputs yet (gridsub status %s)", j.Group.Kind, j.ID, j.State, j.ID)
					fmt.Fprintln(g.stderr, "gridsub:", err)
					return &exitError{exitJobFailed, err}
				}
			} else if !j.State.Final() {
				err := fmt.Errorf("job %s is %s: outputs are fetched when it ends (gridsub watch %s)", j.ID, j.State, j.ID)
				fmt.Fprintln(g.stderr, "gridsub:", err) // run does not print the errors of exit status 1
				return &exitError{exitJobFailed, err}
			}
			if g.json() && !cat {
				out := struct {
					ID       string   `json:"id"`
					State    string   `json:"state"`
					Dir      string   `json:"dir,omitempty"`
					Outputs  []string `json:"outputs"`
					NotFetch []string `json:"fetch_errors,omitempty"`
				}{j.ID, string(j.State), j.Req.OutputDir, j.Outputs, j.FetchErrors}
				if out.Outputs == nil {
					out.Outputs = []string{}
				}
				if err := writeJSON(g.stdout, out); err != nil {
					return err
				}
			} else if cat {
				for i, p := range j.Outputs {
					if i > 0 {
						fmt.Fprintln(g.stdout)
					}
					fmt.Fprintf(g.stdout, "==> %s <==\n", p) // a header per file, as tail(1) prints them
					if err := catFile(g.stdout, p); err != nil {
						return &exitError{exitInternal, err}
					}
				}
			} else {
				for _, p := range j.Outputs {
					fmt.Fprintln(g.stdout, p)
				}
			}
			for _, e := range j.FetchErrors {
				fmt.Fprintf(g.stderr, "gridsub: not fetched: %s\n", e)
			}
			switch {
			case len(j.FetchErrors) > 0:
				return &exitError{exitJobFailed, fmt.Errorf("%d output(s) of %s not fetched", len(j.FetchErrors), j.ID)}
			case len(j.Outputs) == 0 && !g.json():
				fmt.Fprintf(g.stderr, "gridsub: %s has no fetched outputs%s\n", j.ID, noOutputWhy(j))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&cat, "cat", false, "print the outputs' contents, each after a \"==> PATH <==\" header, instead of their paths")
	return c
}

func noOutputWhy(j *bridge.Job) string {
	switch {
	case j.Group != nil:
		return " (none of its elements wrote its declared outputs)"
	case j.Req.OutputDir == "":
		return " (it was submitted without an output directory)"
	case j.State != bridge.Completed && j.State != bridge.Failed && j.State != bridge.Timeout:
		return " (it " + string(j.State) + " before it ran)"
	}
	return " (the job wrote none of its declared outputs)"
}

func catFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
