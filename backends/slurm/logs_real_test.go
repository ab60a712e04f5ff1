package slurm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
)

// A running job's stdout is read over SFTP while it runs (the first line
// is there before the job ends), by offset, and after it ended; stderr is
// its own stream; a link planted as gridsub.err is refused, not followed.
func TestReadLogReal(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	b := newBackend(t, s, c, c)
	ctx := context.Background()
	spec := &backends.JobSpec{GridID: gridID("logs"), Name: "logs", Nodes: 1, Walltime: time.Minute,
		Command: []string{"/bin/sh", "-c", "echo first; echo oops >&2; sleep 4; echo second"}}
	id, err := b.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Cancel(context.Background(), id) })
	var got string
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(got, "first") && time.Now().Before(deadline) {
		data, size, err := b.ReadLog(ctx, id, spec, backends.StreamStdout, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != size {
			t.Fatalf("read %d bytes of %d from offset 0", len(data), size)
		}
		got = string(data)
		time.Sleep(100 * time.Millisecond)
	}
	if got != "first\n" {
		t.Fatalf("stdout while running: %q, want exactly the first line", got)
	}
	st, err := b.Status(ctx, []backends.JobID{id})
	if err != nil || st[0].State.Final() {
		t.Fatalf("the job already ended (%+v, %v): the read did not happen while it ran", st, err)
	}
	// Follow from the offset to the end.
	off := int64(len(got))
	for time.Now().Before(deadline) {
		data, _, err := b.ReadLog(ctx, id, spec, backends.StreamStdout, off, 0)
		if err != nil {
			t.Fatal(err)
		}
		off += int64(len(data))
		got += string(data)
		if strings.Contains(got, "second") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got != "first\nsecond\n" {
		t.Fatalf("stdout followed by offset: %q", got)
	}
	if data, _, err := b.ReadLog(ctx, id, spec, backends.StreamStderr, 0, 3); err != nil || string(data) != "oop" {
		t.Fatalf("stderr, 3 bytes: %q %v", data, err)
	}
	if _, _, err := b.ReadLog(ctx, id, spec, "bogus", 0, 0); err == nil {
		t.Fatal("a bogus stream was read")
	}
	// A link in place of gridsub.err (to a file outside the job directory)
	// is refused.
	dir := s.scratch + "/" + slurm.JobDir(spec)
	if r, err := c.Run(ctx, []string{"ln", "-sf", "/etc/hostname", dir + "/" + backends.StderrFile}, nil); err != nil || r.ExitCode != 0 {
		t.Fatalf("ln: %+v %v", r, err)
	}
	if data, _, err := b.ReadLog(ctx, id, spec, backends.StreamStderr, 0, 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("read through a planted link: %q %v; want refused naming the link", data, err)
	}
	// A job that never wrote (unknown dir) reads as empty.
	other := *spec
	other.GridID = gridID("never")
	if data, size, err := b.ReadLog(ctx, "0", &other, backends.StreamStdout, 0, 0); err != nil || len(data) != 0 || size != 0 {
		t.Fatalf("a job directory that does not exist: %q %d %v; want empty", data, size, err)
	}
}
