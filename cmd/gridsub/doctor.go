package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/internal/config"
)

func newDoctorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor SITE",
		Short: "Walk the login path to a site hop by hop and say where it stops and what to do",
		Long: `Doctor checks, in order, everything gridsub needs to use SITE, and stops at
the first step that fails with what to do about it:

  resolve     the site's ssh section (and, with ssh_config, what ssh -G resolves
              for the alias: host, port, user, keys, known_hosts, ProxyJump)
  for every jump host, then the login node:
    dns         the host name
    connect     TCP, through the jump host before it
    host key    checked against known_hosts (hashed entries and @cert-authority)
    auth        the keys, certificates and questions the login takes
  batch       sbatch --version (SLURM) or qstat --version (PBS) on the login node
  remote dir  the site's remote_dir can be created and written
  sftp        a small file goes up and comes back through SFTP

A one-time password or key passphrase is asked on this terminal. Nothing is
submitted; the test file is removed. Exit status 0 when every step passed,
3 otherwise. --output json prints the steps as JSON.`,
		Example: `  gridsub doctor hpc1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDoctor(cmd.Context(), g, args[0], newTermPrompter(cmd.InOrStdin(), g.stderr))
		},
	}
}

func runDoctor(ctx context.Context, g *globals, name string, p transport.Prompter) error {
	cfg, err := loadConfig(g)
	if err != nil {
		return usageErr(err)
	}
	site, ok := cfg.Site(name)
	if !ok {
		var names []string
		for _, s := range cfg.Sites {
			names = append(names, s.Name)
		}
		return usageErr(fmt.Errorf("doctor: no site %q in %s (the sites are %s)", name, g.config, strings.Join(names, ", ")))
	}
	if site.Kind != config.KindSlurm && site.Kind != config.KindPBS {
		return usageErr(fmt.Errorf("doctor: site %s is a %s site; doctor checks sites reached over SSH (slurm, pbs)", name, site.Kind))
	}
	spec, err := cfg.BackendSpec(site, g.logger())
	if err != nil {
		return usageErr(err)
	}
	spec.Isolate, spec.Path = false, ""
	res, err := plugins.Resolve(spec)
	if err != nil || res.SSH == nil {
		return usageErr(fmt.Errorf("doctor: site %s: %v", name, err))
	}
	tc := *res.SSH
	tc.Lazy = false
	var steps []transport.Step
	report := func(st transport.Step) {
		steps = append(steps, st)
		if !g.json() {
			printStep(g, st)
		}
	}
	done := func(err error) error {
		if g.json() {
			type jstep struct {
				transport.Step
				Error string `json:"error,omitempty"`
			}
			out := struct {
				Site  string  `json:"site"`
				OK    bool    `json:"ok"`
				Steps []jstep `json:"steps"`
			}{Site: name, OK: err == nil}
			for _, s := range steps {
				j := jstep{Step: s}
				if s.Err != nil {
					j.Error = s.Err.Error()
				}
				out.Steps = append(out.Steps, j)
			}
			enc := json.NewEncoder(g.stdout)
			enc.SetIndent("", "  ")
			enc.Encode(out)
		}
		if err != nil {
			last := steps[len(steps)-1]
			return &exitError{exitInternal, fmt.Errorf("doctor: %s: stopped at %s, step %q", name, last.Hop, last.Name)}
		}
		if !g.json() {
			fmt.Fprintf(g.stdout, "%s: every step passed\n", name)
		}
		return nil
	}
	c, err := transport.Diagnose(ctx, tc, p, report)
	if err != nil {
		return done(err)
	}
	defer c.Close()
	login := "login node " + tc.User + "@" + tc.Host
	if len(steps) > 0 {
		login = steps[len(steps)-1].Hop
	}
	// The batch system answers.
	argv := []string{"sbatch", "--version"}
	if site.Kind == config.KindPBS {
		bin := "qstat"
		if site.BinDir != "" {
			bin = path.Join(site.BinDir, "qstat")
		}
		argv = []string{bin, "--version"}
	}
	t := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	r, err := c.Run(rctx, argv, nil)
	cancel()
	out := strings.TrimSpace(string(r.Stdout) + " " + string(r.Stderr))
	st := transport.Step{Hop: login, Name: "batch", OK: err == nil && r.ExitCode == 0, Detail: strings.Join(argv, " ") + ": " + firstLine(out), Took: time.Since(t)}
	if !st.OK {
		if err == nil {
			err = fmt.Errorf("%s exited %d: %s", strings.Join(argv, " "), r.ExitCode, firstLine(out))
		}
		st.Err, st.Detail = err, err.Error()
		st.Fix = fmt.Sprintf("the %s commands are not on the login shell's PATH at the site (for PBS set bin_dir), or the site's kind is wrong", site.Kind)
		report(st)
		return done(err)
	}
	report(st)
	// remote_dir can be made and written.
	t = time.Now()
	rctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	r, err = c.Run(rctx, []string{"sh", "-c", `mkdir -p -- "$1" && t=$(mktemp "$1/.gridsub-doctor.XXXXXX") && rm -f -- "$t"`, "sh", site.RemoteDir}, nil)
	cancel()
	st = transport.Step{Hop: login, Name: "remote dir", OK: err == nil && r.ExitCode == 0, Detail: site.RemoteDir + " is writable", Took: time.Since(t)}
	if !st.OK {
		if err == nil {
			err = fmt.Errorf("%s is not writable by %s: %s", site.RemoteDir, tc.User, firstLine(strings.TrimSpace(string(r.Stderr))))
		}
		st.Err, st.Detail = err, err.Error()
		st.Fix = "choose a remote_dir the login user owns (e.g. under its home or scratch), or ask the site to fix its permissions"
		report(st)
		return done(err)
	}
	report(st)
	// A file goes up and comes back through SFTP.
	t = time.Now()
	rctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sg := c.Stager(site.RemoteDir)
	probe := fmt.Sprintf(".gridsub-doctor-%d", time.Now().UnixNano())
	payload := []byte("gridsub doctor\n")
	_, err = sg.Put(rctx, bytes.NewReader(payload), probe, 0o600)
	var back bytes.Buffer
	if err == nil {
		_, err = sg.Get(rctx, probe, &back)
	}
	c.Run(rctx, []string{"rm", "-f", "--", path.Join(site.RemoteDir, probe)}, nil)
	if err == nil && !bytes.Equal(back.Bytes(), payload) {
		err = errors.New("the file came back different")
	}
	st = transport.Step{Hop: login, Name: "sftp", OK: err == nil, Detail: "a file went up and came back", Took: time.Since(t)}
	if err != nil {
		st.Err, st.Detail = err, err.Error()
		st.Fix = "the site's sshd must offer the sftp subsystem (Subsystem sftp ...)"
		report(st)
		return done(err)
	}
	report(st)
	return done(nil)
}

func printStep(g *globals, st transport.Step) {
	mark := "ok  "
	if !st.OK {
		mark = "FAIL"
	}
	fmt.Fprintf(g.stdout, "%s %-40s %-10s %s (%s)\n", mark, st.Hop, st.Name, st.Detail, st.Took.Round(time.Millisecond))
	if st.Fix != "" {
		fmt.Fprintf(g.stdout, "     what to do: %s\n", st.Fix)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
