package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/simbackend/sshsite"
)

// simGrid serves one simulated site per dialect given (SLURM and PBS
// alternating, nodes each, 2 cores) for the test binary (TestMain answers
// their batch commands) and writes a config reaching them through the
// ordinary slurm and pbs backends.
func simGrid(t *testing.T, nodes []int, dialects []string, policy string) (cfg string, sites []*sshsite.Site) {
	t.Helper()
	d, err := os.MkdirTemp("", "gss")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	key, err := sshsite.NewClientKey(filepath.Join(d, "id"))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("sites:\n")
	var known []string
	for i, n := range nodes {
		name := fmt.Sprintf("%s%d", dialects[i], i)
		s, err := sshsite.Start(context.Background(), sshsite.Config{Name: name, Dialect: dialects[i], Nodes: n, Cores: 2,
			Dir: filepath.Join(d, name), User: "griduser", AuthorizedKeys: []ssh.PublicKey{key.Public}, Exe: exe,
			ExeArgs: []string{"simsite", "cmd"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		sites = append(sites, s)
		known = append(known, s.KnownHosts())
		host, port, _ := strings.Cut(s.Addr(), ":")
		fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n    nodes: %d\n    cores_per_node: 2\n    h: 1.0\n    remote_dir: %s\n", name, dialects[i], n, filepath.Join(s.Home(), "gridsub"))
		if dialects[i] == sshsite.PBS {
			fmt.Fprintf(&b, "    bin_dir: %s\n", s.Bin())
		}
		fmt.Fprintf(&b, "    ssh:\n      host: %s\n      port: %s\n      user: griduser\n      key_file: %s\n      known_hosts: %s\n",
			host, port, key.File, filepath.Join(d, "known_hosts"))
	}
	fmt.Fprintf(&b, "broker:\n  policy: %s\n  interval: 1s\n  poll_interval: 500ms\n  state_dir: %s\n  output_root: %s\n",
		policy, filepath.Join(d, "state"), filepath.Join(d, "out"))
	if err := os.WriteFile(filepath.Join(d, "known_hosts"), []byte(strings.Join(known, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(d, "grid.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, sites
}

// TestSimsiteCoallocSpansPBSAndSLURM: a 6-node job on a grid of a 4-node
// SLURM-dialect and a 4-node PBS-dialect site served over SSH is
// co-allocated across both; each site runs its component once, as a real
// process, and both components' outputs come back.
func TestSimsiteCoallocSpansPBSAndSLURM(t *testing.T) {
	cfg, sites := simGrid(t, []int{4, 4}, []string{sshsite.SLURM, sshsite.PBS}, "optimal-easy")
	dir := t.TempDir()
	job := filepath.Join(dir, "wide.yaml")
	os.WriteFile(job, []byte("name: span\nscript: |\n  echo \"part on ${SLURM_JOB_NODELIST:-$PBS_JOBID}\"\nresources:\n  nodes: 6\n  walltime: 5m\n"), 0o644)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := cli("--config", cfg, "--output", "json", "--out-dir", out, job)
	if code != 0 {
		t.Fatalf("gridsub exited %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, s := range sites {
		ex := s.Executions()
		if len(ex) != 1 {
			t.Errorf("site %s ran %v, want one component once", s.Config().Name, ex)
		}
		for g, n := range ex {
			if n != 1 {
				t.Errorf("site %s ran %s %d times", s.Config().Name, g, n)
			}
		}
	}
	var got []string
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && filepath.Base(p) == "gridsub.out" {
			b, _ := os.ReadFile(p)
			got = append(got, strings.TrimSpace(string(b)))
		}
		return nil
	})
	if len(got) != 2 || !strings.Contains(strings.Join(got, ";"), "slurm0-n") || !strings.Contains(strings.Join(got, ";"), ".pbs1") {
		t.Errorf("fetched outputs %q, want one from each site (a SLURM node list and a PBS job id)", got)
	}
}
