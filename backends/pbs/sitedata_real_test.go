package pbs_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

// The PBS backend hands out and links files below its remote_dir as the
// SLURM backend does (both through sshbatch and the transport Stager; the
// full refusal matrix is TestRealSlurmDataHolder): checked here against
// the OpenPBS testbed's real sshd, with a link planted at the source.
func TestRealPBSDataHolder(t *testing.T) {
	s := testSite(t)
	c := dial(t, s)
	b := newBackend(s, c, c)
	ctx := context.Background()
	root := s.home + "/gridsub-test"
	rel := gridID("dh") // removed whole by the cleanup
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := []byte(strings.Repeat("pbs data\n", 1000))
	if err := os.WriteFile(filepath.Join(dir, "f.dat"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link.dat")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if tr, err := b.ReadData(ctx, rel+"/f.dat", &buf, int64(len(data))); err != nil || !bytes.Equal(buf.Bytes(), data) || tr.SHA256 == "" {
		t.Fatalf("read: %v, %d bytes, %+v", err, buf.Len(), tr)
	}
	buf.Reset()
	if _, err := b.ReadData(ctx, rel+"/link.dat", &buf, 100); err == nil || !strings.Contains(err.Error(), "symbolic link") || buf.Len() != 0 {
		t.Fatalf("read through a link: %v, %d bytes", err, buf.Len())
	}
	spec := &backends.JobSpec{GridID: gridID("dh"), Components: 1, Nodes: 1, Command: []string{"true"}, Walltime: 60e9}
	t.Cleanup(func() { os.RemoveAll(filepath.Join(root, "gridsub", spec.GridID)) })
	if n, err := b.LinkData(ctx, spec, rel+"/f.dat", "big.dat"); err != nil || n != int64(len(data)) {
		t.Fatalf("link: %d, %v", n, err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "gridsub", spec.GridID, "big.dat")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("through the link: %d bytes, %v", len(got), err)
	}
	if _, err := b.LinkData(ctx, spec, rel+"/link.dat", "x.dat"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("link to a link: %v", err)
	}
}
