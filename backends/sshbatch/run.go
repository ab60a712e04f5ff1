package sshbatch

import (
	"context"
	"errors"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

// Fate is what is known of one command once its batch has run.
type Fate int

// The fates.
const (
	// Ran: the command ran to its end; Output.ExitCode is its status.
	Ran Fate = iota
	// NotRun: the command certainly never started: the remote shell ended
	// normally (its whole output was read) without reaching it, or the
	// batch was never sent (transport.ErrNotSent).
	NotRun
	// Unknown: the command may have run, or be running: its start marker
	// arrived but not its end, or the session was lost before its start
	// marker was read. Whatever it was to create must be looked up.
	Unknown
)

func (f Fate) String() string {
	switch f {
	case Ran:
		return "ran"
	case NotRun:
		return "not run"
	default:
		return "unknown"
	}
}

// Fate says what is known of o's command, given the error the Runner
// returned for the batch (nil: the remote shell ended and all of its output
// was read; transport.ErrNotSent: nothing reached the site).
func (o *Output) Fate(runErr error) Fate {
	switch {
	case o.Done:
		return Ran
	case !o.Started && (runErr == nil || errors.Is(runErr, transport.ErrNotSent)):
		return NotRun
	default:
		return Unknown
	}
}

// Run runs one batch through r and splits its output per command. err is
// the Runner's (the session could not be opened, was lost, or ctx ended);
// the outputs are then whatever arrived before, and Output.Fate tells each
// command's.
func Run(ctx context.Context, r backends.Runner, b *Batch) ([]Output, backends.Result, error) {
	res, err := r.Run(ctx, b.Argv, nil)
	return Parse(b.Nonce, len(b.Index), res.Stdout, res.Stderr), res, err
}
