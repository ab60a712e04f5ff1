package sshsite

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// batchCmd is one command of a batch answered in process: a plain dialect
// call, or (pbsDir != "") the PBS backend's submission script for job
// directory pbsDir, whose qsub request is req.
type batchCmd struct {
	req    request
	pbsDir string
	stdin  string
}

// pbsSubmitScript is the script of the PBS backend's submission command
// (`bash -c <script> gridsub-submit <qsub> <jobdir> <qsub options...>`).
var pbsSubmitScript = pbs.Cmds{}.SubmitArgv("", nil)[2]

// batchRequests recognises a batch exactly as backends/sshbatch builds it,
// `/bin/sh -c <script> gridsub-batch` quoted by transport.Quote, whose
// script sshbatch.Decode reads and whose every command is either a plain
// call of one of the site's batch commands (direct's rule: bare name or
// bin/ path, no shell syntax), its here-document its stdin, or — at a PBS
// site — the PBS backend's own submission script with the site's qsub and
// a job directory inside the home. It returns the batch's nonce and the
// commands. Anything else (a script Decode refuses, any other command)
// returns ok false and runs in the real shell, which gives the same answer
// (TestBatchSbatchReadsTheHereDocument, TestBatchPBSMatchesShell).
func (s *Site) batchRequests(line string) (nonce string, cmds []batchCmd, ok bool) {
	w, err := sshbatch.Unquote(line)
	if err != nil || len(w) != 4 || w[0] != sshbatch.Shell || w[1] != "-c" || w[3] != sshbatch.Program {
		return "", nil, false
	}
	nonce, dec, err := sshbatch.Decode(w[2])
	if err != nil {
		return "", nil, false
	}
	for _, c := range dec {
		if bc, ok := s.pbsSubmission(c); ok {
			cmds = append(cmds, bc)
			continue
		}
		req, ok := s.served(c.Argv, map[string]string{"USER": s.cfg.User})
		if !ok {
			return "", nil, false
		}
		in := c.Stdin
		req.stdin = func(max int) ([]byte, error) {
			if len(in) > max {
				return nil, errStdinTooLarge
			}
			return []byte(in), nil
		}
		if in == "" {
			req.stdin = nil // </dev/null
		}
		cmds = append(cmds, batchCmd{req: req})
	}
	return nonce, cmds, true
}

// pbsSubmission recognises the PBS backend's submission command (at a PBS
// site, its qsub the site's, its job directory a clean absolute path
// inside the home, its wrapper on stdin) and returns the qsub request the
// script would make: `qsub -o <dir>/gridsub.out -e <dir>/gridsub.err
// <options...> .gridsub-job.sh` in the job directory.
func (s *Site) pbsSubmission(c sshbatch.Command) (batchCmd, bool) {
	a := c.Argv
	if s.cfg.Dialect != PBS || len(a) < 6 || a[0] != "bash" || a[1] != "-c" || a[2] != pbsSubmitScript ||
		a[3] != "gridsub-submit" || (a[4] != "qsub" && a[4] != path.Join(s.bin, "qsub")) || c.Stdin == "" {
		return batchCmd{}, false
	}
	dir := a[5]
	if !path.IsAbs(dir) || path.Clean(dir) != dir || !strings.HasPrefix(dir, s.home+"/") {
		return batchCmd{}, false
	}
	argv := append([]string{"qsub", "-o", dir + "/" + pbs.StdoutFile, "-e", dir + "/" + pbs.StderrFile}, a[6:]...)
	argv = append(argv, pbs.ScriptFile)
	return batchCmd{req: request{Argv: argv, Cwd: dir, Env: map[string]string{"USER": s.cfg.User}}, pbsDir: dir, stdin: c.Stdin}, true
}

// runPBSSubmission does what the PBS submission script does, through the
// site's os.Root (so not outside the home, links included): make the job
// directory, store the wrapper (0700), submit it from there, record the
// id in .gridsub-jobid and print it; a failing qsub is the command's
// failure with qsub's words, as under the script's `set -e`.
func (s *Site) runPBSSubmission(bc batchCmd) reply {
	fsys := &rootFS{home: s.home, root: s.root}
	rel, err := fsys.rel(bc.pbsDir)
	if err == nil {
		err = s.root.MkdirAll(rel, 0o755)
	}
	if err != nil {
		return reply{Stderr: []byte(fmt.Sprintf("mkdir: cannot create directory '%s': %v\n", bc.pbsDir, err)), Code: 1}
	}
	if err := s.root.WriteFile(path.Join(rel, pbs.ScriptFile), []byte(bc.stdin), 0o700); err != nil {
		return reply{Stderr: []byte(fmt.Sprintf("gridsub-submit: %s: %v\n", pbs.ScriptFile, err)), Code: 1}
	}
	if err := s.root.Chmod(path.Join(rel, pbs.ScriptFile), 0o700); err != nil {
		return reply{Stderr: []byte(fmt.Sprintf("chmod: %v\n", err)), Code: 1}
	}
	rep := s.runSafe(bc.req)
	if rep.Code != 0 {
		return reply{Stderr: rep.Stderr, Code: rep.Code}
	}
	id := strings.TrimRight(string(rep.Stdout), "\n")
	if err := s.root.WriteFile(path.Join(rel, pbs.IDFile), []byte(id+"\n"), 0o644); err != nil {
		return reply{Stderr: append(rep.Stderr, fmt.Sprintf("gridsub-submit: %s: %v\n", pbs.IDFile, err)...), Code: 1}
	}
	return reply{Stdout: []byte(id + "\n"), Stderr: rep.Stderr}
}

// runBatch runs a batch's commands in order in process, writing what the
// batch's shell would: per command, its start marker on stdout (the batch
// stops, exit status 1, when that cannot be written, so nothing runs
// after its output stopped being read) and on stderr, then its output and
// its end marker with its exit status on each (sshbatch.WriteSection's
// format). A run to the end exits 0, as the shell's last printf.
func (s *Site) runBatch(stdout, stderr io.Writer, nonce string, cmds []batchCmd) int {
	for k, bc := range cmds {
		start := "#gridsub-job " + nonce + " " + strconv.Itoa(k) + "\n"
		if _, err := io.WriteString(stdout, start); err != nil {
			return 1
		}
		io.WriteString(stderr, start)
		var rep reply
		if bc.pbsDir != "" {
			rep = s.runPBSSubmission(bc)
		} else {
			rep = s.runSafe(bc.req)
		}
		end := "\n#gridsub-rc " + nonce + " " + strconv.Itoa(k) + " " + strconv.Itoa(rep.Code) + "\n"
		stdout.Write(append(rep.Stdout, end...))
		stderr.Write(append(rep.Stderr, end...))
	}
	return 0
}
