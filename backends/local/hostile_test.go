//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// emptyDir fails the test when dir holds anything.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("%s was written outside its confinement", filepath.Join(dir, e.Name()))
	}
}

// TestHostileSpecs: specs that would lead out of the job directory, or
// that this site cannot run, are refused with the sentinel and a message
// naming the problem, and leave nothing behind.
func TestHostileSpecs(t *testing.T) {
	s := newSite(t, Config{Slots: 2, CoresPerNode: 4, MaxInputBytes: 1000})
	in := filepath.Join(t.TempDir(), "in.dat")
	if err := os.WriteFile(in, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.dat")
	if err := os.WriteFile(big, make([]byte, 1001), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mut  func(*backends.JobSpec)
		want error
		says string
	}{
		{"grid id with ..", func(j *backends.JobSpec) { j.GridID = "../escape" }, backends.ErrInvalidSpec, "grid id"},
		{"grid id with a slash", func(j *backends.JobSpec) { j.GridID = "a/b" }, backends.ErrInvalidSpec, "grid id"},
		{"hidden grid id", func(j *backends.JobSpec) { j.GridID = ".gridsub" }, backends.ErrInvalidSpec, "grid id"},
		{"input escaping", func(j *backends.JobSpec) { j.Inputs = []backends.StageFile{{Local: in, Remote: "../../x"}} }, backends.ErrInvalidSpec, "input"},
		{"input escaping inside", func(j *backends.JobSpec) { j.Inputs = []backends.StageFile{{Local: in, Remote: "a/../../x"}} }, backends.ErrInvalidSpec, "input"},
		{"absolute input", func(j *backends.JobSpec) { j.Inputs = []backends.StageFile{{Local: in, Remote: "/tmp/x"}} }, backends.ErrInvalidSpec, "input"},
		{"input that is a directory", func(j *backends.JobSpec) { j.Inputs = []backends.StageFile{{Local: t.TempDir(), Remote: "x"}} }, backends.ErrInvalidSpec, "regular file"},
		{"input that is missing", func(j *backends.JobSpec) {
			j.Inputs = []backends.StageFile{{Local: filepath.Join(t.TempDir(), "nope"), Remote: "x"}}
		}, backends.ErrInvalidSpec, "nope"},
		{"input over the limit", func(j *backends.JobSpec) { j.Inputs = []backends.StageFile{{Local: big, Remote: "x"}} }, backends.ErrInvalidSpec, "limit"},
		{"output escaping", func(j *backends.JobSpec) { j.Outputs = []string{"../../etc/passwd"} }, backends.ErrInvalidSpec, "output"},
		{"absolute output", func(j *backends.JobSpec) { j.Outputs = []string{"/etc/passwd"} }, backends.ErrInvalidSpec, "output"},
		{"work dir escaping", func(j *backends.JobSpec) { j.WorkDir = "../.." }, backends.ErrInvalidSpec, "work dir"},
		{"absolute work dir", func(j *backends.JobSpec) { j.WorkDir = "/tmp" }, backends.ErrInvalidSpec, "work dir"},
		{"env name", func(j *backends.JobSpec) { j.Env = map[string]string{"A=B": "x"} }, backends.ErrInvalidSpec, "environment"},
		{"env NUL", func(j *backends.JobSpec) { j.Env = map[string]string{"A": "x\x00y"} }, backends.ErrInvalidSpec, "NUL"},
		{"too many nodes", func(j *backends.JobSpec) { j.Nodes = 3 }, backends.ErrInvalidSpec, "slots"},
		{"too many cores", func(j *backends.JobSpec) { j.CoresPerNode = 5 }, backends.ErrInvalidSpec, "cores"},
		{"reservation", func(j *backends.JobSpec) { j.Reservation = "r1" }, backends.ErrUnsupported, "reservations"},
		{"no walltime", func(j *backends.JobSpec) { j.Walltime = 0 }, backends.ErrInvalidSpec, "walltime"},
	} {
		spec := script("exit 0\n")
		c.mut(spec)
		id, err := s.Submit(bg, spec)
		if err == nil {
			t.Errorf("%s: accepted as job %s", c.name, id)
			continue
		}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v naming %q", c.name, err, c.want, c.says)
		}
	}
	// Nothing ran, nothing was recorded, no directory escaped the root.
	if info, _ := s.Info(bg); info.Queued+info.Running != 0 {
		t.Errorf("refused specs left jobs: %+v", info)
	}
	ents, _ := os.ReadDir(filepath.Join(s.cfg.Root, stateDirName))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("a refused spec left the record %s", e.Name())
		}
	}
	for _, p := range []string{filepath.Join(s.cfg.Root, "..", "escape"), filepath.Join(s.cfg.Root, "a")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
}

// TestHostileOutputs: a job that plants symbolic links, a FIFO and an
// oversized file among its outputs gets none of them fetched; the regular
// files beside them are.
func TestHostileOutputs(t *testing.T) {
	s := newSite(t, Config{MaxOutputBytes: 1 << 10})
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := script(strings.Join([]string{
		"ln -s " + secret + " link.txt",
		"ln -s / rootlink",
		"mkdir res && echo ok > res/a && ln -s " + secret + " res/b && mkdir res/sub && echo deep > res/sub/c",
		"mkfifo fifo",
		"head -c 2000 /dev/zero > big",
		"echo fine > fine.txt",
	}, "\n") + "\n")
	id := submit(t, s, spec)
	if st := waitFinal(t, s, id, 10*time.Second); st.State != backends.StateCompleted {
		t.Fatalf("%+v", st)
	}
	for _, c := range []struct {
		out  string
		says string
	}{
		{"link.txt", "symbolic link"},
		{"rootlink" + secret, "escapes"},
		{"fifo", "not a regular file"},
		{"big", "limit"},
	} {
		dst := t.TempDir()
		done := make(chan error, 1)
		go func() {
			_, err := s.FetchOutputs(bg, id, &backends.JobSpec{Outputs: []string{c.out}}, dst)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("fetching %s hangs", c.out)
		}
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("fetching %s: %v, want an error saying %q", c.out, err, c.says)
		}
		if c.says != "escapes" && !errors.Is(err, backends.ErrRejected) {
			t.Errorf("fetching %s: %v does not wrap ErrRejected", c.out, err)
		}
		if _, err := os.Stat(filepath.Join(dst, c.out)); err == nil {
			t.Errorf("%s was written to the destination", c.out)
		}
	}
	dst := t.TempDir()
	got, err := s.FetchOutputs(bg, id, &backends.JobSpec{Outputs: []string{"res/", "fine.txt"}}, dst)
	if err != nil {
		t.Fatalf("fetching res/ and fine.txt: %v", err)
	}
	want := []string{"gridsub.out", "gridsub.err", "res/a", "res/sub/c", "fine.txt"}
	if len(got) != len(want) {
		t.Fatalf("fetched %v, want %v", got, want)
	}
	for i, w := range want {
		if got[i] != filepath.Join(dst, w) {
			t.Errorf("fetched[%d] = %s, want %s", i, got[i], w)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "res", "b")); err == nil {
		t.Error("the link res/b was fetched")
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "res", "sub", "c")); string(b) != "deep\n" {
		t.Errorf("res/sub/c = %q", b)
	}
	// A destination holding a link out of it is not followed either.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dst, "out")); err != nil {
		t.Fatal(err)
	}
	run := script("mkdir out && echo r > out/r.txt\n")
	rid := submit(t, s, run)
	waitFinal(t, s, rid, 10*time.Second)
	if _, err := s.FetchOutputs(bg, rid, &backends.JobSpec{Outputs: []string{"out/r.txt"}}, dst); err == nil {
		t.Error("fetching through a link in the destination succeeded")
	}
	emptyDir(t, outside)
	// Not before the end, and never of an unknown job.
	long := submit(t, s, script("sleep 300\n"))
	if _, err := s.FetchOutputs(bg, long, nil, t.TempDir()); !errors.Is(err, backends.ErrRejected) {
		t.Errorf("fetching a running job's outputs: %v, want ErrRejected", err)
	}
	s.Cancel(bg, long)
	if _, err := s.FetchOutputs(bg, "4242", nil, t.TempDir()); !errors.Is(err, backends.ErrUnknownJob) {
		t.Errorf("fetching for an unknown id: %v, want ErrUnknownJob", err)
	}
}

// TestPlantedLinks: a job that leaves links in its directory cannot make a
// later job of the same tag (a retry) stage its inputs or run its work dir
// outside the job directory.
func TestPlantedLinks(t *testing.T) {
	s := newSite(t, Config{})
	outside := t.TempDir()
	first := script("ln -s " + outside + " in\nln -s " + outside + " wd\n")
	id := submit(t, s, first)
	if st := waitFinal(t, s, id, 10*time.Second); st.State != backends.StateCompleted {
		t.Fatalf("%+v", st)
	}
	src := filepath.Join(t.TempDir(), "x.dat")
	os.WriteFile(src, []byte("x"), 0o644)
	retry := *first
	retry.Script = "exit 0\n"
	retry.Inputs = []backends.StageFile{{Local: src, Remote: "in/x.dat"}}
	if _, err := s.Submit(bg, &retry); err == nil {
		t.Error("staging through a planted link was accepted")
	} else if !errors.Is(err, backends.ErrInvalidSpec) {
		t.Errorf("staging through a planted link: %v, want ErrInvalidSpec", err)
	}
	retry.Inputs = nil
	retry.WorkDir = "wd"
	retry.Script = "touch escaped\n"
	id = submit(t, s, &retry)
	st := waitFinal(t, s, id, 10*time.Second)
	if st.State != backends.StateFailed || !strings.Contains(st.Reason, "work dir") {
		t.Errorf("work dir through a planted link: %+v, want failed naming the work dir", st)
	}
	emptyDir(t, outside)
}
