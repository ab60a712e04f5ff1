package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestDeadlineOneRule: there is one deadline rule (bridge.Feasible), so the
// same job file gets the same answer from `validate`, the embedded broker
// and the daemon (its CLI and its API): a strict deadline the fastest
// placement cannot meet is infeasible — exit 1 with the reason everywhere,
// HTTP 422 — and how late it would end is the same number in every answer;
// best-effort is accepted with a warning (validate says so too). Before,
// two checks disagreed: the transfer case was accepted everywhere
// (Feasible left the transfer out, CheckDeadline the width: it timed the
// job at Harbin, its origin, which has 32 nodes), and where a site's size
// was not known CheckDeadline refused with exit 2 (a field error) what
// validate passed.
func TestDeadlineOneRule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	d, err := os.MkdirTemp("", "gsdl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	// The built-in testbed: Beijing 128, Shanghai 64, Harbin 32 nodes, all
	// h 1, links 1 MB/s, multi-site factor 1.1.
	const job = "name: %s\ncommand: [/bin/true]\nresources: {nodes: %s, walltime: %s}\nscheduling: {%s}\nsimulate: {runtime: 1m}\n"
	cases := []struct {
		name, nodes, walltime, sched string
		exit                         int
		say                          string
	}{
		{"strict", "1", "5h", "deadline: +1h", exitJobFailed, "cannot meet its deadline"},
		{"besteffort", "1", "5h", "deadline: +1h, deadline_policy: best-effort", 0, "no site can finish the job by its deadline"},
		{"split", "200", "1h", "deadline: +65m", exitJobFailed, "Beijing:128+"},
		// Transfer counts: 40 nodes cannot run at Harbin, its origin, and
		// 1 GB at 1 MB/s makes a 1 h run end 6–8 min late.
		{"transfer", "40", "1h", "deadline: +70m, origin: Harbin, data_size: 1GB", exitJobFailed, "Beijing:40 (h 1)"},
		{"meets", "1", "1h", "deadline: +3h", 0, ""},
	}
	late := regexp.MustCompile(`\(([0-9hms.]+) late\)`)
	files := map[string]string{}
	for _, c := range cases {
		files[c.name] = writeJob(t, d, c.name+".yaml", fmt.Sprintf(job, c.name, c.nodes, c.walltime, c.sched))
	}
	type answer struct {
		code int
		out  string
	}
	answers := map[string][]answer{}
	for _, c := range cases {
		code, stdout, stderr := cli("validate", files[c.name])
		answers[c.name] = append(answers[c.name], answer{code, stdout + stderr})
		code, stdout, stderr = cli(files[c.name], "--out-dir", filepath.Join(d, "out-"+c.name))
		answers[c.name] = append(answers[c.name], answer{code, stdout + stderr})
	}

	bin := buildBinary(t)
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	p := startServe(t, bin, state, sock, "--time-scale", "60")
	defer p.term(t, sock)
	ac := api.NewUnixClient(sock)
	ctx := context.Background()
	for _, c := range cases {
		code, stdout, stderr := cli("submit", files[c.name])
		answers[c.name] = append(answers[c.name], answer{code, stdout + stderr})
		// The API itself: 422 for an infeasible job.
		h, err := ac.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		jf, err := loadJob(files[c.name], []string{"Beijing", "Shanghai", "Harbin"})
		if err != nil {
			t.Fatal(err)
		}
		req, err := toRequest(jf, h.Time, "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = ac.Submit(ctx, req)
		var ae *api.Error
		switch {
		case c.exit == 0 && err != nil:
			t.Errorf("%s: API: %v, want accepted", c.name, err)
		case c.exit != 0 && (!errors.As(err, &ae) || ae.Status != 422 || !errors.Is(err, bridge.ErrInfeasible)):
			t.Errorf("%s: API: %v, want 422 infeasible", c.name, err)
		case c.exit != 0:
			answers[c.name] = append(answers[c.name], answer{c.exit, err.Error()})
		}
	}

	for _, c := range cases {
		var lateBy string
		for k, a := range answers[c.name] {
			where := []string{"validate", "embedded", "daemon CLI", "daemon API"}[k]
			if a.code != c.exit || !strings.Contains(a.out, c.say) {
				t.Errorf("%s via %s: exit %d, want %d saying %q:\n%s", c.name, where, a.code, c.exit, c.say, a.out)
				continue
			}
			if c.exit == 0 {
				continue
			}
			m := late.FindStringSubmatch(a.out)
			switch {
			case m == nil:
				t.Errorf("%s via %s: does not say how late: %s", c.name, where, a.out)
			case lateBy == "":
				lateBy = m[1]
			case m[1] != lateBy:
				t.Errorf("%s via %s: %s late, the others %s: two rules", c.name, where, m[1], lateBy)
			}
		}
		if c.name == "besteffort" && !strings.Contains(answers[c.name][0].out, "warning: no site can finish the job by its deadline") {
			t.Errorf("validate does not warn of a best-effort job that will run late: %s", answers[c.name][0].out)
		}
	}
}
