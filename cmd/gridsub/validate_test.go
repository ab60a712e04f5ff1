package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestEmbeddedSubmitConfinesInputs: the embedded CLI goes through the
// broker's Submit like the API: an input outside the allowed roots (or a
// link to one) is refused with the field named and the same text the API
// gives, exit 2, and nothing is written under --out-dir.
func TestEmbeddedSubmitConfinesInputs(t *testing.T) {
	t.Chdir("../..")
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(d, "home")) // the default input root; the test's files are beside it
	if err := os.Symlink("/etc/passwd", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(d, "out")
	for _, c := range []struct{ inputs, want string }{
		{"[{local: /etc/passwd, remote: p}]", "inputs[0].local: /etc/passwd is outside the allowed input roots"},
		{"[link]", "inputs[0].local: " + filepath.Join(d, "link") + " (/etc/passwd with symbolic links resolved) is outside the allowed input roots"},
	} {
		job := filepath.Join(d, "job.yaml")
		src := "name: steal\ncommand: [cat, p]\nresources: {nodes: 1, walltime: 1m}\ninputs: " + c.inputs + "\n"
		if err := os.WriteFile(job, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := cli(job, "--embedded", "--out-dir", out, "-q")
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "gridsub: "+c.want) {
			t.Errorf("inputs %s: exit %d, stdout %q, stderr %q; want exit %d and %q", c.inputs, code, stdout, stderr, exitUsage, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("--out-dir was created: %v", err)
	}
}

// TestDaemonOutputRoot: a daemon writes outputs only inside its output
// root. Without --out-dir the job's outputs go to <root>/<id>; an --out-dir
// outside the root is refused, naming OutputDir and the root.
func TestDaemonOutputRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	t.Chdir("../..")
	d, err := os.MkdirTemp("", "gso")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if d, err = filepath.EvalSymlinks(d); err != nil {
		t.Fatal(err)
	}
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--time-scale", "3000") // output root: d
	elsewhere := t.TempDir()
	code, stdout, stderr := cli("examples/hello.yaml", "--out-dir", elsewhere)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "the output directory (--out-dir): "+filepath.Join(elsewhere, bridge.IDPlaceholder)+" is outside the output root ("+d+")") ||
		!strings.Contains(stderr, "--out-dir must lie inside the daemon's output root (broker.output_root)") {
		t.Errorf("--out-dir outside the root: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = cli("examples/hello.yaml", "-q")
	id := strings.TrimSpace(stdout)
	if code != 0 || id == "" {
		t.Fatalf("without --out-dir: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	j, err := api.NewUnixClient(sock).Job(context.Background(), id)
	if err != nil || j.Req.OutputDir != filepath.Join(d, id) {
		t.Fatalf("job %s output dir %q (%v), want %s", id, j.Req.OutputDir, err, filepath.Join(d, id))
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("written outside the root: %v", ents)
	}
	p.term(t, sock)
}
