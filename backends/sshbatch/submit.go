package sshbatch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

// Submission is one job for Submit: the command that submits it (what the
// backend's single Submit runs, with the job script as stdin) and its tag
// (for messages).
type Submission struct {
	Cmd Command
	Tag string
}

// Site is what Submit needs of a backend.
type Site struct {
	Name string
	Run  backends.Runner
	// Accept turns what job k's command did (exit status, stdout, stderr)
	// into its id or its own error (the backend's single-Submit reading:
	// ErrRejected with the batch system's words, ErrBadOutput).
	Accept func(k int, r backends.Result) (backends.JobID, error)
	// Lookup finds the jobs of ks by their tags at the site, in one
	// command: the id of each one found (absent: none carries the tag).
	// An error means the site could not be asked.
	Lookup func(ctx context.Context, ks []int) (map[int]backends.JobID, error)
	// MaxBytes and MaxCommands bound one batch (0: the defaults).
	MaxBytes, MaxCommands int
	// Parallel is how many batches run at once, each in its own session
	// (0 or 1: one after the other). It never splits jobs that fit in one
	// batch: a cycle's jobs stay one remote command until they exceed
	// MaxBytes or MaxCommands.
	Parallel int
}

// Submit runs subs in as few batches as fit, Site.Parallel of them at
// once, and returns one result per submission, in order:
//
//   - a command that ran: Accept's reading of it;
//   - a command that certainly never ran (the batch was not sent, or the
//     shell ended before it): an error wrapping ErrUnavailable (or ctx's
//     error) — it can be submitted again as it is;
//   - a command whose fate is unknown (the session was cut), or that ran
//     with a zero exit status but an unreadable answer: looked up by tag
//     with Lookup; found, it has its id; else an error wrapping
//     ErrUnavailable and backends.ErrOutcomeUnknown — the shell may still
//     submit it, so the caller must look again before resubmitting.
//
// A command that cannot go in a here-document (Command.Check), or is too
// large to share a batch, runs alone with its stdin streamed, as a single
// Submit would.
func Submit(ctx context.Context, s Site, subs []Submission) []backends.SubmitResult {
	res := make([]backends.SubmitResult, len(subs))
	var in []Command
	var at, alone []int
	for k := range subs {
		if subs[k].Cmd.Check() != nil {
			alone = append(alone, k)
			continue
		}
		in = append(in, subs[k].Cmd)
		at = append(at, k)
	}
	batches, big, err := Build(in, s.MaxBytes, s.MaxCommands)
	if err != nil { // cannot happen: every command passed Check
		for _, k := range at {
			res[k].Err = fmt.Errorf("%s: %w", s.Name, err)
		}
		batches = nil
	}
	for _, j := range big {
		alone = append(alone, at[j])
	}
	var (
		mu      sync.Mutex
		unknown []int
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, max(s.Parallel, 1))
	for bi := range batches {
		bt := &batches[bi]
		if err := ctx.Err(); err != nil {
			for _, j := range bt.Index {
				res[at[j]].Err = fmt.Errorf("%s: job %s not submitted: %w", s.Name, subs[at[j]].Tag, err)
			}
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			u := runBatch(ctx, s, subs, at, bt, res)
			mu.Lock()
			unknown = append(unknown, u...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Ints(unknown)
	for _, k := range alone {
		r, err := s.Run.Run(ctx, subs[k].Cmd.Argv, strings.NewReader(subs[k].Cmd.Stdin))
		if err != nil {
			res[k].Err = SentErr(fmt.Errorf("%s: %w", s.Name, err))
			continue
		}
		res[k].ID, res[k].Err = s.Accept(k, r)
	}
	if len(unknown) > 0 {
		resolve(ctx, s, subs, unknown, res)
	}
	return res
}

// runBatch runs one batch and settles its jobs' results (each job's own
// slot of res); it returns the jobs whose outcome is unknown.
func runBatch(ctx context.Context, s Site, subs []Submission, at []int, bt *Batch, res []backends.SubmitResult) []int {
	var unknown []int
	outs, _, runErr := Run(ctx, s.Run, bt)
	for n, j := range bt.Index {
		k := at[j]
		o := &outs[n]
		switch o.Fate(runErr) {
		case Ran:
			res[k].ID, res[k].Err = s.Accept(k, backends.Result{Stdout: o.Stdout, Stderr: o.Stderr, ExitCode: o.ExitCode})
			if res[k].Err != nil && o.ExitCode == 0 {
				unknown = append(unknown, k) // accepted, but which id?
			}
		case NotRun:
			switch {
			case ctx.Err() != nil:
				res[k].Err = fmt.Errorf("%s: job %s not submitted: %w", s.Name, subs[k].Tag, ctx.Err())
			case runErr != nil:
				res[k].Err = fmt.Errorf("%w: %s: job %s not submitted: %w", backends.ErrUnavailable, s.Name, subs[k].Tag, runErr)
			default:
				res[k].Err = fmt.Errorf("%w: %s: job %s not submitted: the batch ended before it", backends.ErrUnavailable, s.Name, subs[k].Tag)
			}
		default:
			err := runErr
			if err == nil {
				err = errors.New("its section of the output is incomplete")
			}
			res[k].Err = fmt.Errorf("%w: %s: running its batch: %w", backends.ErrUnavailable, s.Name, err)
			unknown = append(unknown, k)
		}
	}
	return unknown
}

// resolve looks the jobs of unknown up by tag and settles their results.
func resolve(ctx context.Context, s Site, subs []Submission, unknown []int, res []backends.SubmitResult) {
	var found map[int]backends.JobID
	var err error
	if err = ctx.Err(); err == nil {
		found, err = s.Lookup(ctx, unknown)
	}
	for _, k := range unknown {
		cause := res[k].Err
		if id, ok := found[k]; ok && err == nil {
			res[k] = backends.SubmitResult{ID: id}
			continue
		}
		why := "not found right after its batch was cut (it may still arrive)"
		if err != nil {
			why = fmt.Sprintf("cannot look it up (%v)", err)
		}
		e := fmt.Errorf("%w: %w: %s: job %s may have been submitted: %s", backends.ErrUnavailable, backends.ErrOutcomeUnknown, s.Name, subs[k].Tag, why)
		if cause != nil {
			e = fmt.Errorf("%w: %w", e, cause)
		}
		res[k] = backends.SubmitResult{Err: e}
	}
}

// SentErr is the error of a submission whose command failed to run (a
// Runner error): unless it was certainly never sent
// (transport.ErrNotSent), the request may have reached the batch system,
// so it wraps ErrUnavailable and backends.ErrOutcomeUnknown and the caller
// must look the tag up before resubmitting.
func SentErr(err error) error {
	if errors.Is(err, transport.ErrNotSent) {
		if !errors.Is(err, backends.ErrUnavailable) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", backends.ErrUnavailable, err)
		}
		return err
	}
	if !errors.Is(err, backends.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", backends.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", backends.ErrOutcomeUnknown, err)
}
