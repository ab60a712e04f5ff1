package sshsite

import (
	"path"
	"slices"
	"strings"

	"github.com/gridsub/gridsub/backends/sshbatch"
)

// direct recognises a command line that is only a call of one of the
// site's batch commands, quoted the way transport.Quote quotes an argv
// (bare safe words, '...' segments, \' ), optionally behind
// `env [-u NAME]... [NAME=value]...`, and returns the request that the
// bin/ stub would have sent. The SSH server answers such a line in
// process instead of starting /bin/sh, the stub and the multi-call binary:
// the same dialect code gives the same answer (TestDirectMatchesShell),
// without ~15 ms of process starts per command. Anything else (scripts,
// pipes, other programs) returns ok false and runs in the real shell.
func (s *Site) direct(line string) (req request, ok bool) {
	w, err := sshbatch.Unquote(line)
	if err != nil {
		return request{}, false
	}
	env := map[string]string{"USER": s.cfg.User}
	if w[0] == "env" || w[0] == "/usr/bin/env" {
		i := 1
		for i < len(w) {
			switch {
			case w[i] == "-u" && i+1 < len(w):
				delete(env, w[i+1])
				i += 2
			case strings.Contains(w[i], "=") && !strings.HasPrefix(w[i], "-") && !strings.HasPrefix(w[i], "="):
				k, v, _ := strings.Cut(w[i], "=")
				env[k] = v
				i++
			default:
				goto cmd
			}
		}
	cmd:
		w = w[i:]
		if len(w) == 0 {
			return request{}, false
		}
	}
	return s.served(w, env)
}

// served returns the request for argv w when w[0] names one of the site's
// batch commands (its bare name or its path in bin/), in the home with env.
func (s *Site) served(w []string, env map[string]string) (request, bool) {
	name := path.Base(w[0])
	served := slurmCmds
	if s.cfg.Dialect == PBS {
		served = pbsCmds
	}
	if !slices.Contains(served, name) || (w[0] != name && w[0] != path.Join(s.bin, name)) {
		return request{}, false
	}
	return request{Argv: append([]string{name}, w[1:]...), Cwd: s.home, Env: env}, true
}
