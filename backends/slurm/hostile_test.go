package slurm_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
)

const secret = "SECRET OUTSIDE THE JOB DIRECTORY"

// waitEnd polls until the job has ended.
func waitEnd(t *testing.T, b *slurm.Backend, id backends.JobID) backends.JobStatus {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		sts, err := b.Status(context.Background(), []backends.JobID{id})
		if err == nil && len(sts) == 1 && sts[0].State.Final() {
			return sts[0]
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("job %s did not end within 2 minutes", id)
	return backends.JobStatus{}
}

// TestHostileJobFetchReal runs a job on the real testbed that leaves
// behind, in its job directory, links to a secret outside it, to /dev/zero
// and to a directory outside, FIFOs and an oversized file, and declares
// them all as outputs; the local output directory has a link planted at
// the stdout's name. FetchOutputs must bring back the regular files only,
// name every refused path and its type, read nothing of the secret, not
// hang on /dev/zero or the FIFOs, not write through the planted link, and
// stop at the job's byte limit.
func TestHostileJobFetchReal(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := gridID("hostile")
	secretDir := path.Join(s.scratch, "outside-"+id)
	secretFile := path.Join(secretDir, "secret.txt")
	if r, err := c.Run(ctx, []string{"sh", "-c", `mkdir -p "$1" && printf '%s' "$2" > "$1/secret.txt"`, "sh", secretDir, secret}, nil); err != nil || r.ExitCode != 0 {
		t.Fatalf("planting the secret: %v %s", err, r.Stderr)
	}
	t.Cleanup(func() { c.Run(context.Background(), []string{"rm", "-rf", secretDir}, nil) })
	script := strings.Join([]string{
		"echo hello",
		"ln -s " + secretFile + " leak",
		"ln -s /dev/zero zero",
		"mkfifo fifo",
		"ln -s " + secretDir + " linkdir",
		"mkdir -p out/sub",
		"echo fine > out/ok.txt",
		"echo deeper > out/sub/deep.txt",
		"ln -s " + secretFile + " out/leak",
		"ln -s /dev/zero out/zero",
		"mkfifo out/fifo",
		"head -c 100000 /dev/zero > big.bin",
	}, "\n")
	spec := &backends.JobSpec{GridID: id, Name: "hostile", Script: script, Nodes: 1, Walltime: time.Minute,
		Outputs: []string{"leak", "zero", "fifo", "linkdir/secret.txt", "out/"}}
	b := newBackend(t, s, c, c)
	jid, err := b.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if st := waitEnd(t, b, jid); st.State != backends.StateCompleted {
		t.Fatalf("job ended %s (%s)", st.State, st.Reason)
	}

	local := t.TempDir()
	victimDir := t.TempDir()
	victim := filepath.Join(victimDir, "victim.txt")
	if err := os.WriteFile(victim, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(local, slurm.StdoutFile)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	got, err := b.FetchOutputs(ctx, jid, spec, local)
	took := time.Since(t0)
	if err == nil {
		t.Fatal("FetchOutputs of a hostile job directory succeeded")
	}
	t.Logf("fetch took %s; error:\n%v", took, err)
	if took > 30*time.Second {
		t.Errorf("fetch took %s", took)
	}
	if !errors.Is(err, transport.ErrSpecialFile) {
		t.Errorf("error does not match ErrSpecialFile: %v", err)
	}
	for _, want := range []string{
		"leak on 127.0.0.1", "zero on 127.0.0.1", "is a symbolic link", "fifo on 127.0.0.1", "named pipe (FIFO)",
		"linkdir on 127.0.0.1", "is a symbolic link, not a directory",
		"out/leak is a symbolic link", "out/zero is a symbolic link", "out/fifo is a named pipe (FIFO)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q", want)
		}
	}
	var names []string
	for _, p := range got {
		rel, _ := filepath.Rel(local, p)
		names = append(names, rel)
	}
	slices.Sort(names)
	if want := []string{"gridsub.err", "gridsub.out", "out/ok.txt", "out/sub/deep.txt"}; !slices.Equal(names, want) {
		t.Errorf("fetched %q, want %q", names, want)
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Errorf("the planted link's target was written: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(local, slurm.StdoutFile)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("stdout is not a regular file in place of the planted link: %v %v", fi, err)
	} else if b, _ := os.ReadFile(filepath.Join(local, slurm.StdoutFile)); string(b) != "hello\n" {
		t.Errorf("stdout holds %q", b)
	}
	filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "SECRET") {
				t.Errorf("%s holds the secret", p)
			}
		}
		if strings.Contains(d.Name(), ".gridsub-part-") {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})

	// The job's byte limit: 100000 bytes of big.bin do not fit in 50000.
	small := slurm.New(slurm.Config{Name: s.name, RemoteDir: s.scratch, User: s.ssh.User, MaxJobBytes: 50000},
		c, func(root string) backends.Stager { return c.Stager(root) })
	spec2 := *spec
	spec2.Outputs = []string{"big.bin"}
	_, err = small.FetchOutputs(ctx, jid, &spec2, t.TempDir())
	if !errors.Is(err, transport.ErrTooLarge) || !strings.Contains(err.Error(), "staging.max_job_bytes") || !strings.Contains(err.Error(), "50000") {
		t.Errorf("over the job limit: %v, want ErrTooLarge naming staging.max_job_bytes and 50000", err)
	}
}

// TestHostileStageInReal: a job directory whose input subdirectory is a
// link to a directory outside (planted before submission) is refused at
// stage-in with ErrSpecialFile, nothing is written outside, and no job is
// submitted; a FIFO named as a local input is refused without hanging.
func TestHostileStageInReal(t *testing.T) {
	s := testSite(t, "siteA")
	c := dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := gridID("stagein")
	outside := path.Join(s.scratch, "outside-"+id)
	jobDir := path.Join(s.scratch, "gridsub", id)
	if r, err := c.Run(ctx, []string{"sh", "-c", `mkdir -p "$1" "$2" && ln -s "$1" "$2/in"`, "sh", outside, jobDir}, nil); err != nil || r.ExitCode != 0 {
		t.Fatalf("planting the link: %v %s", err, r.Stderr)
	}
	t.Cleanup(func() { c.Run(context.Background(), []string{"rm", "-rf", outside, jobDir}, nil) })
	in := filepath.Join(t.TempDir(), "data.txt")
	if err := os.WriteFile(in, []byte("payload"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, s, c, c)
	spec := &backends.JobSpec{GridID: id, Command: []string{"true"}, Nodes: 1, Walltime: time.Minute,
		Inputs: []backends.StageFile{{Local: in, Remote: "in/data.txt"}}}
	_, err := b.Submit(ctx, spec)
	if !errors.Is(err, transport.ErrSpecialFile) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Submit through a symlinked input directory: %v, want ErrSpecialFile", err)
	}
	r, err := c.Run(ctx, []string{"ls", "-A", outside}, nil)
	if err != nil || r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout)) != "" {
		t.Errorf("outside the job directory now holds %q (%v)", r.Stdout, err)
	}
	if sts, err := b.FindByGridID(ctx, id); err != nil || len(sts) != 0 {
		t.Errorf("a job was submitted: %v %v", sts, err)
	}

	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	spec.GridID = gridID("stagein-fifo")
	spec.Inputs = []backends.StageFile{{Local: fifo, Remote: "data.txt"}}
	t0 := time.Now()
	if _, err := b.Submit(ctx, spec); !errors.Is(err, backends.ErrInvalidSpec) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO as input: %v, want ErrInvalidSpec saying not a regular file", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("refusing a FIFO input took %s", d)
	}
}
