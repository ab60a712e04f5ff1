package sshsite

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

func sshClient(t *testing.T, s *testSite, user string, signer ssh.Signer) (*ssh.Client, error) {
	t.Helper()
	hk, err := knownhosts.New(s.known)
	if err != nil {
		t.Fatal(err)
	}
	return ssh.Dial("tcp", s.Addr(), &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hk})
}

func keySigner(t *testing.T, file string) ssh.Signer {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

// TestAuthAndHostKey: only the authorized key of the configured user logs
// in, and a client that checks host keys refuses a site whose key it does
// not know.
func TestAuthAndHostKey(t *testing.T) {
	s := startSite(t, SLURM, 2, 1, 1)
	good := keySigner(t, s.key)
	c, err := sshClient(t, s, s.cfg.User, good)
	if err != nil {
		t.Fatalf("authorized key refused: %v", err)
	}
	c.Close()
	if _, err := sshClient(t, s, "someoneelse", good); err == nil {
		t.Error("another user name logged in with the key")
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewSignerFromKey(priv)
	if _, err := sshClient(t, s, s.cfg.User, other); err == nil {
		t.Error("an unauthorized key logged in")
	}
	// Another site's known_hosts does not vouch for this one.
	s2 := startSite(t, SLURM, 2, 1, 1)
	tc := s.Transport(s.key, s2.known)
	if c, err := transport.Dial(context.Background(), tc); err == nil {
		c.Close()
		t.Error("transport accepted a host key known_hosts does not list")
	}
}

// TestSFTPConfined: SFTP reaches the site's home and nothing else: not an
// absolute path outside, not "..", not through a symbolic link (to a
// file or a directory) that leaves the home; writes are bounded.
func TestSFTPConfined(t *testing.T) {
	s := startSite(t, SLURM, 2, 1, 1)
	outside := filepath.Join(filepath.Dir(s.Home()), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(s.Home(), "link-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(s.Home()), filepath.Join(s.Home(), "link-dir")); err != nil {
		t.Fatal(err)
	}
	c, err := sshClient(t, s, s.cfg.User, keySigner(t, s.key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	// Inside works (relative paths start at the home).
	f, err := sc.Create("ok.txt")
	if err != nil {
		t.Fatalf("create in the home: %v", err)
	}
	f.Write([]byte("fine"))
	f.Close()
	if b, err := os.ReadFile(filepath.Join(s.Home(), "ok.txt")); err != nil || string(b) != "fine" {
		t.Fatalf("written file: %q, %v", b, err)
	}
	if wd, err := sc.Getwd(); err != nil || wd != s.Home() {
		t.Errorf("working directory %q (%v), want the home %s", wd, err, s.Home())
	}
	for _, p := range []string{outside, "../secret.txt", "link-file", "link-dir/secret.txt", "/etc/passwd"} {
		if f, err := sc.Open(p); err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("read %s outside the home: %q", p, b)
		}
		if f, err := sc.Create(p); err == nil {
			f.Close()
			t.Errorf("created %s outside the home", p)
		}
		if _, err := sc.Stat(p); err == nil && p != "link-file" {
			t.Errorf("stat %s outside the home succeeded", p)
		}
	}
	if err := sc.Mkdir("link-dir/newdir"); err == nil {
		t.Error("mkdir through a link leaving the home succeeded")
	}
	if err := sc.Rename("ok.txt", "../moved.txt"); err == nil {
		t.Error("rename out of the home succeeded")
	}
	if err := sc.Symlink("/etc", "etc-link"); err == nil {
		t.Error("the site let a client create a symbolic link")
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Errorf("the outside file changed: %q", b)
	}
	// Writes are bounded per file.
	s.root.Close()
	small := &rootFS{home: s.home, maxFile: 4}
	if r, err := os.OpenRoot(s.home); err == nil {
		small.root = r
		defer r.Close()
	}
	f2, _ := small.root.Create("big")
	bf := boundedFile{f2, 4}
	if _, err := bf.WriteAt([]byte("12345"), 0); err == nil {
		t.Error("a write past the per-file limit succeeded")
	}
	f2.Close()
}

// run runs one command line at the site over SSH.
func run(t *testing.T, s *testSite, line string) (string, string, int) {
	t.Helper()
	c, err := sshClient(t, s, s.cfg.User, keySigner(t, s.key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ss, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	var o, e bytes.Buffer
	ss.Stdout, ss.Stderr = &o, &e
	err = ss.Run(line)
	code := 0
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitStatus()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestGarbageGetsTheRealKindOfError: bad options, bad ids and unknown
// commands get what the real commands print (checked against the
// testbeds by hand and in compare_test.go) and change nothing.
func TestGarbageGetsTheRealKindOfError(t *testing.T) {
	sl := startSite(t, SLURM, 2, 1, 1)
	pb := startSite(t, PBS, 2, 1, 1)
	for _, c := range []struct {
		s      *testSite
		line   string
		code   int
		stderr string
	}{
		{sl, "sbatch --bogus x", 255, "sbatch: unrecognized option '--bogus'"},
		{sl, "sbatch /nonexistent", 1, "Batch script is empty"},
		{sl, "printf 'echo hi\\n' > nb.sh; sbatch nb.sh", 1, "This does not look like a batch script"},
		{sl, "printf '#!/bin/sh\\n' > b.sh; sbatch --partition=nope b.sh", 1, "Invalid partition name specified"},
		{sl, "printf '#!/bin/sh\\n' > b.sh; sbatch --nodes=99 b.sh", 1, "More processors requested than permitted"},
		{sl, "squeue -j abc", 1, "squeue: error: Invalid job id: abc"},
		{sl, "squeue -j 12345", 1, "Invalid job id specified"},
		{sl, "squeue --bogus", 1, "squeue: unrecognized option '--bogus'"},
		{sl, "scancel abc", 1, "scancel: error: Invalid job id abc"},
		{sl, "scancel 12345", 0, ""},
		{sl, "sacct -j 1", 1, "Slurm accounting storage is disabled"},
		{sl, "scontrol bogus", 1, "invalid keyword: bogus"},
		{sl, "scontrol show job 999999", 1, "slurm_load_jobs error: Invalid job id specified"},
		{sl, "nosuchcommand", 127, "not found"},
		{sl, "qsub x", 127, "not found"}, // a SLURM site has no PBS commands
		{pb, "qsub -l foo=1 x", 187, "qsub: Unknown resource Resource_List.foo"},
		{pb, "printf '#!/bin/sh\\n' > b.sh; qsub -q nosuch b.sh", 170, "qsub: Unknown queue"},
		{pb, "qsub /nonexistent", 1, "qsub: script not a file"},
		{pb, "qsub -N 'bad name' x", 2, "qsub: illegal -N value"},
		{pb, "qstat -x -f -F dsv 999999." + pb.cfg.Name, 153, "qstat: Unknown Job Id 999999." + pb.cfg.Name},
		{pb, "qstat --bogus", 2, "qstat: invalid option -- '-'"},
		{pb, "qdel 999999." + pb.cfg.Name, 153, "qdel: Unknown Job Id"},
		{pb, "qdel abc", 1, "qdel: illegally formed job identifier: abc"},
		{pb, "pbs_rstat -f R99999", 0, "pbs_rstat: Unknown Reservation Id"},
		{pb, "pbs_rdel R99999", 236, "pbs_rdel: Unknown Reservation Id"},
		{pb, "sbatch x", 127, "not found"},
	} {
		_, stderr, code := run(t, c.s, c.line)
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%s: %q: exit %d, stderr %q; want exit %d and %q", c.s.cfg.Dialect, c.line, code, stderr, c.code, c.stderr)
		}
	}
	for _, s := range []*testSite{sl, pb} {
		if st := s.Stats(); st.Started != 0 || len(s.Executions()) != 0 {
			t.Errorf("%s: garbage started jobs: %+v", s.cfg.Dialect, st)
		}
	}
}

// TestJobRunsAsRealProcessOnce: a submitted script runs once, as a real
// process, with the batch system's environment, in the dialect's working
// directory, its output in the files asked for; the engine's walltime
// kills a process that runs too long.
func TestJobRunsAsRealProcessOnce(t *testing.T) {
	s := startSite(t, SLURM, 2, 1, 60) // 60 site seconds per wall second
	out, stderr, code := run(t, s, `mkdir -p j && cd j && printf '#!/bin/bash\necho "id=$SLURM_JOB_ID dir=$PWD"\necho $$ >> runs\n' > a.sh && sbatch --parsable --time=1 --output=o.txt a.sh`)
	if code != 0 {
		t.Fatalf("sbatch: %d %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if o, _, _ := run(t, s, "env SLURM_TIME_FORMAT=%s squeue -h -j "+id+" -O State:0"); strings.TrimSpace(o) == "COMPLETED" {
			break
		}
	}
	b, err := os.ReadFile(filepath.Join(s.Home(), "j", "o.txt"))
	if err != nil || strings.TrimSpace(string(b)) != "id="+id+" dir="+filepath.Join(s.Home(), "j") {
		t.Errorf("job output %q (%v)", b, err)
	}
	if runs, _ := os.ReadFile(filepath.Join(s.Home(), "j", "runs")); strings.Count(string(runs), "\n") != 1 {
		t.Errorf("the script ran %d times", strings.Count(string(runs), "\n"))
	}
	// 1 minute of walltime is 1 s of wall time here: a 30 s sleep is killed.
	out, _, _ = run(t, s, `cd j && printf '#!/bin/bash\nsleep 30\n' > long.sh && sbatch --parsable --time=1 long.sh`)
	id = strings.TrimSpace(out)
	state := ""
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		o, _, _ := run(t, s, "squeue -h -j "+id+" -O State:0")
		if state = strings.TrimSpace(o); state == "TIMEOUT" {
			break
		}
	}
	if state != "TIMEOUT" {
		t.Errorf("a job past its walltime is %q, want TIMEOUT", state)
	}
}

// TestSLURMForgetsAfterMinJobAge: an ended job leaves squeue after
// MinJobAge, as in SLURM; the backend then finds it in the jobcomp log the
// site writes (scontrol show config names it), by id and by grid tag.
func TestSLURMForgetsAfterMinJobAge(t *testing.T) {
	s := startSiteCfg(t, Config{Dialect: SLURM, Nodes: 2, Cores: 1, Scale: 1, MinJobAge: 300 * time.Millisecond})
	b, closeB, err := s.Backend(context.Background(), s.key, s.known, "g")
	if err != nil {
		t.Fatal(err)
	}
	defer closeB()
	ctx := context.Background()
	spec := &backends.JobSpec{GridID: gridID("mja"), Components: 1, Nodes: 1, Walltime: time.Minute, Command: []string{"/bin/sh", "-c", "exit 4"}}
	id, err := b.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	var st []backends.JobStatus
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if st, err = b.Status(ctx, []backends.JobID{id}); err == nil && st[0].State.Final() {
			break
		}
	}
	time.Sleep(600 * time.Millisecond)
	if out, _, _ := run(t, s, "squeue -h -t all -O JobID:0"); strings.TrimSpace(out) != "" {
		t.Errorf("squeue still lists %q after MinJobAge", out)
	}
	st, err = b.Status(ctx, []backends.JobID{id})
	if err != nil || st[0].State != backends.StateFailed || st[0].ExitCode != 4 || !strings.Contains(st[0].Reason, "jobcomp") {
		t.Errorf("status after MinJobAge: %+v, %v; want failed, exit 4, from the jobcomp log", st, err)
	}
	f, _ := backends.AsFinder(b)
	found, err := f.FindByGridID(ctx, spec.GridID)
	if err != nil || len(found) != 1 || found[0].ID != id {
		t.Errorf("FindByGridID after MinJobAge: %+v, %v", found, err)
	}
}
