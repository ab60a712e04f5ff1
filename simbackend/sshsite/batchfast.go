package sshsite

import (
	"io"
	"strconv"

	"github.com/gridsub/gridsub/backends/sshbatch"
)

// batchRequests recognises a batch exactly as backends/sshbatch builds it,
// `/bin/sh -c <script> gridsub-batch` quoted by transport.Quote, whose
// script sshbatch.Decode reads and whose every command is a plain call of
// one of the site's batch commands (direct's rule: bare name or bin/
// path, no shell syntax), each command's here-document its stdin. It
// returns the batch's nonce and one request per command. Anything else
// (a PBS batch, whose commands are `bash -c` scripts; a script Decode
// refuses) returns ok false and runs in the real shell, which gives the
// same answer (TestBatchFastMatchesShell).
func (s *Site) batchRequests(line string) (nonce string, reqs []request, ok bool) {
	w, ok := splitQuoted(line)
	if !ok || len(w) != 4 || w[0] != sshbatch.Shell || w[1] != "-c" || w[3] != sshbatch.Program {
		return "", nil, false
	}
	nonce, cmds, err := sshbatch.Decode(w[2])
	if err != nil {
		return "", nil, false
	}
	for _, c := range cmds {
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
		reqs = append(reqs, req)
	}
	return nonce, reqs, true
}

// runBatch runs a batch's requests in order in process, writing what the
// batch's shell would: per command, its start marker on stdout (the batch
// stops, exit status 1, when that cannot be written, so nothing runs
// after its output stopped being read) and on stderr, then its output and
// its end marker with its exit status on each (sshbatch.WriteSection's
// format). A run to the end exits 0, as the shell's last printf.
func (s *Site) runBatch(stdout, stderr io.Writer, nonce string, reqs []request) int {
	for k, req := range reqs {
		start := "#gridsub-job " + nonce + " " + strconv.Itoa(k) + "\n"
		if _, err := io.WriteString(stdout, start); err != nil {
			return 1
		}
		io.WriteString(stderr, start)
		rep := s.runSafe(req)
		end := "\n#gridsub-rc " + nonce + " " + strconv.Itoa(k) + " " + strconv.Itoa(rep.Code) + "\n"
		stdout.Write(append(rep.Stdout, end...))
		stderr.Write(append(rep.Stderr, end...))
	}
	return 0
}
