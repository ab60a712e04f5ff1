package sshbatchtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// DataHolder: a file below the remote directory is read whole, with its
// SHA-256, and linked into a job directory by a relative symbolic link;
// everything that is not a regular file inside the remote directory is
// refused, and a refused link leaves nothing behind.
func DataHolder(t *testing.T, s Site) {
	b := s.New(s.Client)
	ctx := context.Background()
	rel := s.GridID("dh")
	dir := filepath.Join(s.Root, rel) // removed whole by the cleanup
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "f.dat"), data, 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link.dat")))
	must(os.Symlink(outside, filepath.Join(dir, "linkdir")))
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o755))

	var buf bytes.Buffer
	tr, err := b.ReadData(ctx, rel+"/f.dat", &buf, int64(len(data)))
	sum := sha256.Sum256(data)
	if err != nil || !bytes.Equal(buf.Bytes(), data) || tr.Bytes != int64(len(data)) || tr.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("read: %v, %d bytes, transfer %+v", err, buf.Len(), tr)
	}
	for _, c := range []struct {
		path  string
		limit int64
		is    error
		text  string
	}{
		{rel + "/f.dat", int64(len(data)) - 1, transport.ErrTooLarge, "over the limit"},
		{rel + "/none.dat", 10, fs.ErrNotExist, "none.dat"},
		{rel + "/link.dat", 10, transport.ErrSpecialFile, "is a symbolic link"},
		{rel + "/linkdir/secret", 10, transport.ErrSpecialFile, "is a symbolic link, not a directory"},
		{rel + "/sub", 10, transport.ErrSpecialFile, "is a directory"},
		{"../" + filepath.Base(outside), 10, backends.ErrInvalidSpec, "must be a relative path"},
		{"/etc/passwd", 10, backends.ErrInvalidSpec, "must be a relative path"},
	} {
		buf.Reset()
		_, err := b.ReadData(ctx, c.path, &buf, c.limit)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.text) || buf.Len() != 0 {
			t.Errorf("read %s: %v (%d bytes written); want %v with %q and nothing written", c.path, err, buf.Len(), c.is, c.text)
		}
	}

	spec := &backends.JobSpec{GridID: s.GridID("dh"), Components: 1, Nodes: 1, Command: []string{"true"}, Walltime: time.Minute}
	jobDir := filepath.Join(s.Root, sshbatch.JobDir(spec))
	t.Cleanup(func() { os.RemoveAll(jobDir) })
	for range 2 { // the second time replaces the first link
		n, err := b.LinkData(ctx, spec, rel+"/f.dat", "in/big.dat")
		if err != nil || n != int64(len(data)) {
			t.Fatalf("link: %d, %v", n, err)
		}
	}
	text, err := os.Readlink(filepath.Join(jobDir, "in", "big.dat"))
	if err != nil || text != "../../../"+rel+"/f.dat" {
		t.Fatalf("link text %q, %v; want a relative link to %s/f.dat", text, err, rel)
	}
	if got, err := os.ReadFile(filepath.Join(jobDir, "in", "big.dat")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("through the link: %d bytes, %v", len(got), err)
	}
	must(os.WriteFile(filepath.Join(jobDir, "plain"), []byte("x"), 0o644))
	for _, c := range []struct{ path, remote, text string }{
		{rel + "/link.dat", "a", "is a symbolic link"},
		{rel + "/linkdir/secret", "a", "is a symbolic link, not a directory"},
		{rel + "/none.dat", "a", "does not exist"},
		{rel + "/f.dat", "plain", "refused to replace it with a link"},
		{rel + "/f.dat", "../escape", "must be a relative path inside the job directory"},
	} {
		if _, err := b.LinkData(ctx, spec, c.path, c.remote); err == nil || !strings.Contains(err.Error(), c.text) {
			t.Errorf("link %s as %s: %v; want %q", c.path, c.remote, err, c.text)
		}
	}
	if _, err := os.Lstat(filepath.Join(jobDir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused link left %s/a behind: %v", jobDir, err)
	}
}

// ReadLog: a job's stdout is read over SFTP by offset (while the job runs
// where the site writes it there, Site.LiveOutput; else once the batch
// system has copied it back) and after it ended; stderr is its own stream;
// a link planted as gridsub.err is refused, not followed; a job directory
// that does not exist reads as empty.
func ReadLog(t *testing.T, s Site) {
	b := s.New(s.Client)
	ctx := context.Background()
	spec := &backends.JobSpec{GridID: s.GridID("logs"), Name: "logs", Nodes: 1, Walltime: time.Minute,
		Command: []string{"/bin/sh", "-c", "echo first; echo oops >&2; sleep 4; echo second"}}
	id, err := b.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Cancel(context.Background(), id) })
	read := func(stream string, off int64, max int) string {
		t.Helper()
		data, size, err := b.ReadLog(ctx, id, spec, stream, off, max)
		if err != nil {
			t.Fatal(err)
		}
		if off == 0 && max == 0 && int64(len(data)) != size {
			t.Fatalf("read %d bytes of %d from offset 0", len(data), size)
		}
		return string(data)
	}
	deadline := time.Now().Add(2 * time.Minute)
	got := ""
	if s.LiveOutput {
		for !strings.Contains(got, "first") && time.Now().Before(deadline) {
			got = read(backends.StreamStdout, 0, 0)
			time.Sleep(100 * time.Millisecond)
		}
		if got != "first\n" {
			t.Fatalf("stdout while running: %q, want exactly the first line", got)
		}
		if st, err := b.Status(ctx, []backends.JobID{id}); err != nil || st[0].State.Final() {
			t.Fatalf("the job already ended (%+v, %v): the read did not happen while it ran", st, err)
		}
	} else {
		waitFinal(t, b, []backends.JobID{id}, 2*time.Minute)
	}
	// Follow from the offset to the end (the copy back may trail the end
	// by a moment).
	for off := int64(len(got)); !strings.Contains(got, "second") && time.Now().Before(deadline); {
		data := read(backends.StreamStdout, off, 0)
		off += int64(len(data))
		got += data
		time.Sleep(200 * time.Millisecond)
	}
	if got != "first\nsecond\n" {
		t.Fatalf("stdout followed by offset: %q", got)
	}
	if data := read(backends.StreamStderr, 0, 3); data != "oop" {
		t.Fatalf("stderr, 3 bytes: %q", data)
	}
	if _, _, err := b.ReadLog(ctx, id, spec, "bogus", 0, 0); !errors.Is(err, backends.ErrInvalidSpec) {
		t.Fatalf("a bogus stream: %v, want ErrInvalidSpec", err)
	}
	// A link in place of gridsub.err (to a file outside the job directory)
	// is refused.
	link := filepath.Join(s.Root, sshbatch.JobDir(spec), backends.StderrFile)
	if r, err := s.Client.Run(ctx, []string{"ln", "-sf", "/etc/hostname", link}, nil); err != nil || r.ExitCode != 0 {
		t.Fatalf("ln: %+v %v", r, err)
	}
	if data, _, err := b.ReadLog(ctx, id, spec, backends.StreamStderr, 0, 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("read through a planted link: %q %v; want refused naming the link", data, err)
	}
	other := *spec
	other.GridID = s.GridID("never")
	if data, size, err := b.ReadLog(ctx, id, &other, backends.StreamStdout, 0, 0); err != nil || len(data) != 0 || size != 0 {
		t.Fatalf("a job directory that does not exist: %q %d %v; want empty", data, size, err)
	}
}
