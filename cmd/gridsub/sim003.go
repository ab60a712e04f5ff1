package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/gridsub/gridsub/simbackend/experiment/paper003"
)

// runPaper003 runs an experiment file of kind paper003 (paper 003's
// repetitive mapping on a simulated grid of clusters and repositories).
func runPaper003(ctx context.Context, g *globals, f *simFlags, file string) error {
	if f.jobs > 0 || f.viaBroker {
		return usageErr(fmt.Errorf("%s is a paper003 experiment: --jobs and --via-broker do not apply (tasks.count sets the meta-task)", file))
	}
	s, err := paper003.Load(file)
	if err != nil {
		return usageErr(err)
	}
	out := f.out
	if out == "" {
		out = filepath.Join("out", s.Name)
	}
	sum, err := paper003.Execute(ctx, s, f.workers)
	switch {
	case ctx.Err() != nil:
		return &exitError{exitInternal, fmt.Errorf("sim %s: interrupted; nothing written to %s", file, out)}
	case err != nil:
		return &exitError{exitInternal, fmt.Errorf("sim %s: %w", file, err)}
	}
	sum.File = file
	files, err := paper003.WriteAll(out, sum)
	if err != nil {
		return &exitError{exitInternal, fmt.Errorf("sim %s: writing results: %w", file, err)}
	}
	if g.json() {
		return paper003.WriteJSON(g.stdout, sum)
	}
	paper003.WriteTable(g.stdout, sum)
	fmt.Fprintf(g.stdout, "\n%d runs on %d workers in %s; wrote %s\n", len(sum.Runs), sum.Workers,
		time.Duration(sum.WallSeconds*float64(time.Second)).Round(100*time.Millisecond), strings.Join(files, ", "))
	return nil
}
