package sshbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// fakeSite "submits" a job by printing id-<its stdin>; a job whose stdin
// says "refuse" is refused on stderr with exit 1. Commands run for real in
// /bin/sh on this machine.
type fakeSite struct {
	run     backends.Runner
	found   map[string]backends.JobID // what Lookup finds, by tag
	lookErr error
	lookups int
}

func (f *fakeSite) site() sshbatch.Site {
	return sshbatch.Site{Name: "fake", Run: f.run,
		Accept: func(k int, r backends.Result) (backends.JobID, error) {
			if r.ExitCode != 0 {
				return "", fmt.Errorf("%w: exit %d: %s", backends.ErrRejected, r.ExitCode, strings.TrimSpace(string(r.Stderr)))
			}
			id, ok := strings.CutPrefix(strings.TrimSpace(string(r.Stdout)), "id-")
			if !ok {
				return "", fmt.Errorf("%w: %q", backends.ErrBadOutput, r.Stdout)
			}
			return backends.JobID(id), nil
		}}
}

func subs(stdins ...string) []sshbatch.Submission {
	var out []sshbatch.Submission
	for i, in := range stdins {
		out = append(out, sshbatch.Submission{Tag: fmt.Sprintf("t%d", i), Cmd: sshbatch.Command{
			Argv: []string{"sh", "-c", `read x; if [ "$x" = refuse ]; then echo "no: $x" >&2; exit 1; fi; echo "id-$x"`}, Stdin: in}})
	}
	return out
}

func (f *fakeSite) submit(ctx context.Context, ss []sshbatch.Submission) []backends.SubmitResult {
	s := f.site()
	s.Lookup = func(ctx context.Context, ks []int) (map[int]backends.JobID, error) {
		f.lookups++
		if f.lookErr != nil {
			return nil, f.lookErr
		}
		out := map[int]backends.JobID{}
		for _, k := range ks {
			if id, ok := f.found[ss[k].Tag]; ok {
				out[k] = id
			}
		}
		return out, nil
	}
	return sshbatch.Submit(ctx, s, ss)
}

// cut runs a batch locally and keeps its output only up to the end of
// command `keep`, then reports the connection lost: what a session cut
// mid-batch looks like to Submit.
type cut struct {
	keep int
	err  error
}

func (c cut) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	r, err := local{}.Run(ctx, argv, stdin)
	if err != nil || len(argv) != 4 || argv[3] != sshbatch.Program {
		return r, err
	}
	nonce := strings.Fields(strings.SplitN(argv[2], "\n", 2)[0])[3]
	end := []byte(fmt.Sprintf("#gridsub-rc %s %d 0\n", nonce, c.keep))
	n := bytes.Index(r.Stdout, end) + len(end)
	// and the start of the next command's section, as far as it came
	r.Stdout = append(r.Stdout[:n:n], fmt.Sprintf("#gridsub-job %s %d\n", nonce, c.keep+1)...)
	return r, c.err
}

func TestSubmitPerJobResults(t *testing.T) {
	f := &fakeSite{run: local{}}
	res := f.submit(context.Background(), subs("1\n", "refuse\n", "3\n"))
	if res[0].ID != "1" || res[2].ID != "3" || res[0].Err != nil || res[2].Err != nil {
		t.Errorf("accepted jobs: %+v", res)
	}
	if !errors.Is(res[1].Err, backends.ErrRejected) || !strings.Contains(res[1].Err.Error(), "no: refuse") || res[1].ID != "" {
		t.Errorf("refused job: %+v, want its own ErrRejected with the site's words", res[1])
	}
	if f.lookups != 0 {
		t.Errorf("%d lookups for a batch that ran to its end", f.lookups)
	}
}

// TestSubmitCut: the session is lost after command 1's end: 0 and 1 are
// read, 2 and 3 looked up: 2 is found (it was submitted before the cut),
// 3 is not and stays ErrOutcomeUnknown.
func TestSubmitCut(t *testing.T) {
	lost := fmt.Errorf("%w: connection lost", backends.ErrUnavailable)
	f := &fakeSite{run: cut{keep: 1, err: lost}, found: map[string]backends.JobID{"t2": "2"}}
	res := f.submit(context.Background(), subs("0\n", "1\n", "2\n", "3\n"))
	if res[0].ID != "0" || res[1].ID != "1" || res[2].ID != "2" {
		t.Errorf("results: %+v", res)
	}
	if !backends.OutcomeUnknown(res[3].Err) || !backends.Retryable(res[3].Err) || !strings.Contains(res[3].Err.Error(), "t3") {
		t.Errorf("job 3: %v, want ErrOutcomeUnknown, retryable, naming its tag", res[3].Err)
	}
	if f.lookups != 1 {
		t.Errorf("%d lookups, want one for both unknown jobs", f.lookups)
	}
	// The lookup fails: both stay unknown, with the reason.
	f = &fakeSite{run: cut{keep: 1, err: lost}, lookErr: errors.New("squeue: timeout")}
	res = f.submit(context.Background(), subs("0\n", "1\n", "2\n", "3\n"))
	for _, k := range []int{2, 3} {
		if !backends.OutcomeUnknown(res[k].Err) || !strings.Contains(res[k].Err.Error(), "squeue: timeout") {
			t.Errorf("job %d: %v, want ErrOutcomeUnknown with the lookup's failure", k, res[k].Err)
		}
	}
}

// TestSubmitNotSent: a batch that never left (no session) fails every job
// as retryable, NOT unknown, and nothing is looked up.
func TestSubmitNotSent(t *testing.T) {
	run := runFunc(func(context.Context, []string, io.Reader) (backends.Result, error) {
		return backends.Result{}, fmt.Errorf("%w: %w", transport.ErrNotSent, transport.ErrSessionLimit)
	})
	f := &fakeSite{run: run}
	for k, r := range f.submit(context.Background(), subs("0\n", "1\n")) {
		if !backends.Retryable(r.Err) || backends.OutcomeUnknown(r.Err) {
			t.Errorf("job %d: %v, want retryable and not unknown", k, r.Err)
		}
	}
	if f.lookups != 0 {
		t.Errorf("%d lookups for a batch never sent", f.lookups)
	}
	// A ctx already done: nothing is sent either.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f = &fakeSite{run: local{}}
	for k, r := range f.submit(ctx, subs("0\n")) {
		if !errors.Is(r.Err, context.Canceled) || backends.OutcomeUnknown(r.Err) {
			t.Errorf("job %d under a cancelled ctx: %v", k, r.Err)
		}
	}
}

// TestSubmitAlone: a command whose stdin cannot go in a here-document
// runs alone, stdin streamed; the others are still batched.
func TestSubmitAlone(t *testing.T) {
	var calls []string
	run := runFunc(func(ctx context.Context, argv []string, in io.Reader) (backends.Result, error) {
		calls = append(calls, argv[len(argv)-1])
		return local{}.Run(ctx, argv, in)
	})
	f := &fakeSite{run: run}
	res := f.submit(context.Background(), subs("0\n", "no-newline", "2\n"))
	if res[0].ID != "0" || res[1].ID != "no-newline" || res[2].ID != "2" {
		t.Errorf("results %+v", res)
	}
	if len(calls) != 2 || calls[0] != sshbatch.Program {
		t.Errorf("remote commands %q, want one batch then the lone one", calls)
	}
}

type runFunc func(context.Context, []string, io.Reader) (backends.Result, error)

func (f runFunc) Run(ctx context.Context, argv []string, in io.Reader) (backends.Result, error) {
	return f(ctx, argv, in)
}

// TestSubmitParallel: with Parallel 3 and at most 4 commands a batch, ten
// jobs go in three batches run at once, and every result is still in its
// job's place.
func TestSubmitParallel(t *testing.T) {
	var mu sync.Mutex
	batches, running, most := 0, 0, 0
	run := runFunc(func(ctx context.Context, argv []string, in io.Reader) (backends.Result, error) {
		mu.Lock()
		batches++
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		return local{}.Run(ctx, argv, in)
	})
	f := &fakeSite{run: run}
	var ins []string
	for i := 0; i < 10; i++ {
		ins = append(ins, fmt.Sprintf("%d\n", i))
	}
	s := f.site()
	s.Parallel, s.MaxCommands = 3, 4
	s.Lookup = func(context.Context, []int) (map[int]backends.JobID, error) { return nil, nil }
	res := sshbatch.Submit(context.Background(), s, subs(ins...))
	for i, r := range res {
		if r.Err != nil || r.ID != backends.JobID(fmt.Sprint(i)) {
			t.Errorf("job %d: %+v", i, r)
		}
	}
	if batches < 3 || most < 2 {
		t.Errorf("%d batches, at most %d at once; want >= 3 batches run concurrently", batches, most)
	}
}
