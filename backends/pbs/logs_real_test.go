package pbs_test

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// On PBS a job's output reaches the job directory when it ends (PBS
// spools it on the execution host until then): ReadLog reads it there,
// gridsub.out and gridsub.err under the same names as on SLURM.
func TestReadLogReal(t *testing.T) {
	s := testSite(t) // takes the testbed's lock
	c := dial(t, s)
	b := newBackend(s, c, c)
	ctx := context.Background()
	spec := &backends.JobSpec{GridID: gridID("logs"), Name: "logs", Nodes: 1, Walltime: time.Minute,
		Command: []string{"/bin/sh", "-c", "echo out-line; echo err-line >&2"}}
	id, err := b.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Cancel(context.Background(), id) })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := b.Status(ctx, []backends.JobID{id})
		if err != nil {
			t.Fatal(err)
		}
		if st[0].State.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s", st[0].State)
		}
		time.Sleep(300 * time.Millisecond)
	}
	var out string
	for time.Now().Before(deadline) && out == "" {
		data, _, err := b.ReadLog(ctx, id, spec, backends.StreamStdout, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = string(data)
		time.Sleep(200 * time.Millisecond) // the copy back may trail the end by a moment
	}
	if out != "out-line\n" {
		t.Fatalf("stdout %q", out)
	}
	if data, _, err := b.ReadLog(ctx, id, spec, backends.StreamStderr, 0, 0); err != nil || string(data) != "err-line\n" {
		t.Fatalf("stderr %q %v", data, err)
	}
}
