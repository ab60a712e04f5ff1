package slurm_test

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

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

// The DataHolder of a real SLURM site (backends.DataHolder over the
// testbed's real sshd): a file below remote_dir is read whole, with its
// SHA-256, and linked into a job directory by a relative symbolic link;
// everything that is not a regular file inside remote_dir is refused.
func TestRealSlurmDataHolder(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	b := newBackend(t, s, c, c)
	ctx := context.Background()
	dir := filepath.Join(s.scratch, gridID("dh")) // removed whole by the cleanup
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	rel, _ := filepath.Rel(s.scratch, dir)
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	if err := os.WriteFile(filepath.Join(dir, "f.dat"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
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

	spec := &backends.JobSpec{GridID: gridID("dh"), Components: 1, Nodes: 1, Command: []string{"true"}, Walltime: 60e9}
	jobDir := filepath.Join(s.scratch, "gridsub", spec.GridID)
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
