package bridge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

// TestOwnerFiles: a daemon's job of another user (here the local account
// nobody) stages only inputs that user could read, writes outputs only
// below <output_root>/<user>/, and, when the daemon runs as root, hands
// the files it fetched there (and the directories it made) to the user; a
// user with no local account stages no local inputs; the daemon's own
// user's jobs keep the daemon's rights.
func TestOwnerFiles(t *testing.T) {
	tmp, err := os.MkdirTemp("", "gsof") // searchable by others, unlike t.TempDir's parent
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	os.Chmod(tmp, 0o755)
	base, err := filepath.EvalSymlinks(tmp)
	if err != nil {
		t.Fatal(err)
	}
	open, private, hidden := filepath.Join(base, "open.dat"), filepath.Join(base, "private.dat"), filepath.Join(base, "closed", "in.dat")
	os.WriteFile(open, []byte("x"), 0o644)
	os.WriteFile(private, []byte("x"), 0o600)
	os.MkdirAll(filepath.Dir(hidden), 0o700)
	os.WriteFile(hidden, []byte("x"), 0o644)
	br, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: newFake("A", 1)}}, Planner: scriptPlanner{firstFit},
		OutputRoot: base, InputRoots: []string{base}, Owner: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(owner, in, out string) (*Job, error) {
		r := req(1)
		r.Owner = owner
		if in != "" {
			r.Inputs = []backends.StageFile{{Local: in, Remote: "in"}}
		}
		r.OutputDir = out
		return br.Submit(context.Background(), r, t0)
	}
	asRoot := os.Geteuid() == 0
	for _, c := range []struct {
		owner, in, out, want string // want: "" accepted, else a part of the refusal
	}{
		{"nobody", open, "", ""},
		{"nobody", private, "", "may not read"},
		{"nobody", hidden, "", "may not search"},
		{"nobody", "", filepath.Join(base, "elsewhere"), "outside user nobody's directory of the output root"},
		{"nobody", "", filepath.Join(base, "nobody", "res"), ""},
		{"gridsub-no-such-user", open, "", "has no account on the broker's machine"},
		{"svc", private, filepath.Join(base, "elsewhere"), ""},
	} {
		if !asRoot && c.owner == "svc" {
			continue // the daemon's own rights: the test's user may not be able to read private.dat's owner's file
		}
		_, err := submit(c.owner, c.in, c.out)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s, input %q, output %q: %v", c.owner, c.in, c.out, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s, input %q, output %q: %v, want a refusal saying %q", c.owner, c.in, c.out, err, c.want)
		}
	}
	j, err := submit("nobody", "", "res")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "nobody", "res"); j.Req.OutputDir != want {
		t.Errorf("nobody's relative output directory is %s, want %s", j.Req.OutputDir, want)
	}

	if !asRoot {
		t.Log("not root: handing outputs over is not tried")
		return
	}
	dir := filepath.Join(base, "nobody", "j1", "sub")
	os.MkdirAll(dir, 0o755)
	f := filepath.Join(dir, "out.txt")
	os.WriteFile(f, []byte("result"), 0o644)
	if err := br.stages.fetch.handOver("nobody", []string{f}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, dir, filepath.Dir(dir), filepath.Join(base, "nobody")} {
		fi, err := os.Stat(p)
		if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
			t.Errorf("%s is not nobody's after the hand-over: %v %v", p, fi, err)
		}
	}
	if fi, _ := os.Stat(base); fi.Sys().(*syscall.Stat_t).Uid == 65534 {
		t.Error("the output root itself was handed over")
	}
}
