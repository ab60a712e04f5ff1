package sshsite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
	"golang.org/x/crypto/ssh"
)

// slurmBatch is a SLURM batch as backends/slurm builds it (sbatch with the
// wrapper on a here-document) with the failures a batch must carry per
// job: an unknown partition, no script at all, a foreign command.
func slurmBatch(t *testing.T, s *testSite) sshbatch.Batch {
	t.Helper()
	dir := filepath.Join(s.Home(), "bj")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := slurm.Wrapper(&backends.JobSpec{GridID: "bf-1", Nodes: 1, Walltime: time.Hour, Command: []string{"/bin/true"}})
	bs, alone, err := sshbatch.Build([]sshbatch.Command{
		{Argv: []string{"sbatch", "--chdir=" + dir, "--parsable", "--job-name=ok", "--comment=gridsub:bf-1", "--time=60"}, Stdin: wrapper},
		{Argv: []string{"sbatch", "--chdir=" + dir, "--parsable", "--partition=nope"}, Stdin: wrapper},
		{Argv: []string{"sbatch", "--chdir=" + dir, "--parsable"}},
		{Argv: []string{filepath.Join(s.Bin(), "squeue"), "-h", "-j", "4242"}},
		{Argv: []string{"sbatch", "--chdir=" + dir, "--parsable", "--job-name=ok2"}, Stdin: "#!/bin/sh\necho GRIDSUB_STDIN_4\n"},
	}, 0, 0)
	if err != nil || len(bs) != 1 || len(alone) != 0 {
		t.Fatalf("Build: %v, %d batches, %v alone", err, len(bs), alone)
	}
	return bs[0]
}

var jobIDLine = regexp.MustCompile(`(?m)^[0-9]+$`)

// TestBatchSbatchReadsTheHereDocument is the defect of session 7: in a
// batch, sbatch reads its wrapper from a here-document, and the SLURM
// dialect answered "Batch script is empty!" — through the real shell and
// the bin/ stub (which sent no stdin) and so through every batch. Both the
// shell path ("exec" in front) and the in-process path must submit the
// jobs with a script and refuse the others with sbatch's words, and print
// the same thing (job ids aside).
func TestBatchSbatchReadsTheHereDocument(t *testing.T) {
	s := startSite(t, SLURM, 4, 2, 20)
	b := slurmBatch(t, s)
	line := transport.Quote(b.Argv)
	if _, _, ok := s.batchRequests(line); !ok {
		t.Fatalf("a SLURM batch does not take the in-process path")
	}
	type result struct {
		out, err string
		code     int
	}
	var res []result
	var ids []backends.JobID
	for _, l := range []string{"exec " + line, line} {
		o, e, code := run(t, s, l)
		outs := sshbatch.Parse(b.Nonce, len(b.Index), []byte(o), []byte(e))
		for k, want := range []struct {
			code int
			out  string
			err  string
		}{{0, "id", ""}, {1, "", "Invalid partition"}, {1, "", "Batch script is empty!"}, {1, "", "Invalid job id"}, {0, "id", ""}} {
			g := outs[k]
			if !g.Done || g.ExitCode != want.code {
				t.Errorf("%q: command %d: done %v exit %d, want exit %d (stderr %q)", l[:12], k, g.Done, g.ExitCode, want.code, g.Stderr)
				continue
			}
			if want.out == "id" && !jobIDLine.Match(g.Stdout) {
				t.Errorf("%q: command %d: stdout %q is not a job id", l[:12], k, g.Stdout)
			}
			if !strings.Contains(string(g.Stderr), want.err) {
				t.Errorf("%q: command %d: stderr %q, want %q in it", l[:12], k, g.Stderr, want.err)
			}
		}
		for _, k := range []int{0, 4} {
			ids = append(ids, backends.JobID(strings.TrimSpace(string(outs[k].Stdout))))
		}
		res = append(res, result{jobIDLine.ReplaceAllString(o, "ID"), e, code})
	}
	if res[0] != res[1] {
		t.Errorf("shell and in-process batch differ:\nshell:      %+v\nin process: %+v", res[0], res[1])
	}
	// The four jobs submitted run their here-documents to completion.
	be, closeB, err := s.Backend(context.Background(), s.key, s.known, "g")
	if err != nil {
		t.Fatal(err)
	}
	defer closeB()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := be.Status(context.Background(), ids)
		done := 0
		for _, j := range st {
			if j.State == backends.StateCompleted {
				done++
			}
		}
		if err == nil && done == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch's jobs did not all complete: %v %+v", err, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBatchPBSMatchesShell: a PBS batch (each command the PBS backend's
// `bash -c` submission script with the wrapper on stdin) is answered in
// process exactly as the real shell answers it — ids aside: the job
// directory made, the wrapper stored 0700, qsub's id printed and recorded
// in .gridsub-jobid, a refused qsub's words and exit status. A job
// directory outside the home, a foreign script or anything not exactly a
// batch is left to the shell.
func TestBatchPBSMatchesShell(t *testing.T) {
	s := startSite(t, PBS, 2, 1, 20)
	c := pbs.Cmds{Bin: s.Bin()}
	wrapper := "#!/bin/sh\ntrue\n"
	build := func(tag string) (sshbatch.Batch, []string) {
		var dirs []string
		var cmds []sshbatch.Command
		for k, q := range [][]string{{"-N", "ok"}, {"-N", "bad", "-q", "nope"}, {"-N", "ok2"}} {
			d := filepath.Join(s.Home(), "gridsub", fmt.Sprintf("%s-%d", tag, k))
			dirs = append(dirs, d)
			cmds = append(cmds, sshbatch.Command{Argv: c.SubmitArgv(d, q), Stdin: wrapper})
		}
		bs, _, err := sshbatch.Build(cmds, 0, 0)
		if err != nil || len(bs) != 1 {
			t.Fatalf("Build: %v", err)
		}
		return bs[0], dirs
	}
	idRe := regexp.MustCompile(`[0-9]+\.` + s.cfg.Name)
	var res []string
	for i, pre := range []string{"exec ", ""} {
		b, dirs := build(fmt.Sprintf("p%d", i))
		line := transport.Quote(b.Argv)
		if _, _, ok := s.batchRequests(line); !ok {
			t.Fatal("a PBS batch does not take the in-process path")
		}
		o, e, code := run(t, s, pre+line)
		outs := sshbatch.Parse(b.Nonce, 3, []byte(o), []byte(e))
		for k, want := range []int{0, 170, 0} {
			if !outs[k].Done || outs[k].ExitCode != want {
				t.Errorf("%q: command %d: %+v, want exit %d", pre, k, outs[k], want)
			}
		}
		if !strings.Contains(string(outs[1].Stderr), "Unknown queue") {
			t.Errorf("%q: refused qsub said %q", pre, outs[1].Stderr)
		}
		for _, k := range []int{0, 2} {
			id, err := os.ReadFile(filepath.Join(dirs[k], pbs.IDFile))
			if err != nil || string(id) != string(outs[k].Stdout) || !idRe.Match(id) {
				t.Errorf("%q: job %d: id file %q %v, printed %q", pre, k, id, err, outs[k].Stdout)
			}
			fi, err := os.Stat(filepath.Join(dirs[k], pbs.ScriptFile))
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%q: job %d: wrapper %v %v, want mode 0700", pre, k, fi, err)
			}
		}
		norm := strings.ReplaceAll(idRe.ReplaceAllString(o+"|"+e, "ID"), b.Nonce, "NONCE") // the dirs differ, so do the nonces
		res = append(res, fmt.Sprintf("%d|%s", code, norm))
	}
	if res[0] != res[1] {
		t.Errorf("shell and in-process differ:\nshell:      %q\nin process: %q", res[0], res[1])
	}
	b, _ := build("q")
	line := transport.Quote(b.Argv)
	outside := strings.ReplaceAll(line, s.Home()+"/gridsub", "/tmp/gridsub")
	for _, l := range []string{outside, strings.Replace(line, "gridsub-batch", "other", 1), "exec " + line,
		strings.Replace(line, "mkdir -p", "mkdir  -p", 1),
		transport.Quote([]string{"/bin/sh", "-c", "# gridsub-batch v1 0123456789abcdef 1\nqstat\n", "gridsub-batch"})} {
		if _, _, ok := s.batchRequests(l); ok {
			t.Errorf("%.80q took the in-process batch path", l)
		}
	}
}

// TestSbatchStdin: sbatch given no script reads its stdin — over the
// in-process path and through the shell and the bin/ stub — bounded; given
// a script file it never waits on a stdin left open.
func TestSbatchStdin(t *testing.T) {
	s := startSite(t, SLURM, 2, 1, 20)
	script := filepath.Join(s.Home(), "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runIn := func(line string, stdin io.Reader) (string, string, int) {
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
		ss.Stdin, ss.Stdout, ss.Stderr = stdin, &o, &e
		done := make(chan error, 1)
		go func() { done <- ss.Run(line) }()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%q: no answer in 20 s", line)
		}
		var ee *ssh.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitStatus()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	for _, pre := range []string{"", "exec "} {
		o, e, code := runIn(pre+"sbatch --parsable --job-name=in", strings.NewReader("#!/bin/sh\ntrue\n"))
		if code != 0 || !jobIDLine.MatchString(strings.TrimSpace(o)) {
			t.Errorf("%q with a script on stdin: %d %q %q", pre, code, o, e)
		}
		_, e, code = runIn(pre+"sbatch --parsable", strings.NewReader(""))
		if code != 1 || !strings.Contains(e, "Batch script is empty!") {
			t.Errorf("%q with empty stdin: %d %q", pre, code, e)
		}
		big := "#!/bin/sh\n" + strings.Repeat("# padding\n", maxScript/10+1)
		_, e, code = runIn(pre+"sbatch --parsable", strings.NewReader(big))
		if code != 1 || !strings.Contains(e, "too large") {
			t.Errorf("%q with %d bytes on stdin: %d %q", pre, len(big), code, e)
		}
		pr, pw := io.Pipe() // a stdin that never ends
		o, e, code = runIn(pre+"sbatch --parsable "+script, pr)
		pw.Close()
		if code != 0 || !jobIDLine.MatchString(strings.TrimSpace(o)) {
			t.Errorf("%q with a script file and an open stdin: %d %q %q", pre, code, o, e)
		}
	}
}
