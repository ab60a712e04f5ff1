package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/internal/config"
	"github.com/gridsub/gridsub/policy"
)

func writeJob(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// validate checks feasibility against the configured sites (the built-in
// testbed: Beijing 128 nodes x 8 cores, Shanghai 64 x 4, Harbin 32 x 4):
// each infeasible file exits 1 with its reason; a bad file still exits 2.
func TestValidateFeasibility(t *testing.T) {
	d := t.TempDir()
	cases := []struct{ name, src, want string }{
		{"nosplit.yaml", "name: w\ncommand: [x]\nresources: {nodes: 200, walltime: 1h}\nscheduling: {no_split: true}\n",
			"needs 200 nodes on one site (no_split); the largest eligible site is Beijing with 128"},
		{"deadline.yaml", "name: d\ncommand: [x]\nresources: {nodes: 1, walltime: 5h}\nscheduling: {deadline: +1h}\n",
			"cannot meet its deadline"},
		{"cores.yaml", "name: c\ncommand: [x]\nresources: {nodes: 1, cores_per_node: 6, walltime: 1h}\nscheduling: {sites: [Shanghai, Harbin]}\n",
			"Shanghai: 4 cores per node, the job asks 6; Harbin: 4 cores per node, the job asks 6"},
		{"gpu.yaml", "name: g\ncommand: [x]\nresources: {nodes: 1, gpus_per_node: 1, walltime: 1h}\n",
			"Beijing: no GPUs, the job asks 1 per node"},
		{"mem.yaml", "name: m\ncommand: [x]\nresources: {nodes: 1, memory_per_node: 64GiB, walltime: 1h}\n",
			"Beijing: 32GiB memory per node, the job asks 64GiB"},
		{"wide.yaml", "name: w\ncommand: [x]\nresources: {nodes: 100, cores_per_node: 8, walltime: 1h}\n",
			""}, // 100 nodes with 8 cores: Beijing alone (128) holds it
		{"split-cores.yaml", "name: s\ncommand: [x]\nresources: {nodes: 150, cores_per_node: 8, walltime: 1h}\n",
			"needs 150 nodes; the eligible sites have 128 in all (Beijing 128) (not eligible: Shanghai: 4 cores per node"},
	}
	for _, c := range cases {
		p := writeJob(t, d, c.name, c.src)
		code, stdout, stderr := cli("validate", p)
		if c.want == "" {
			if code != 0 {
				t.Errorf("%s: exit %d\n%s%s", c.name, code, stdout, stderr)
			}
			continue
		}
		if code != exitJobFailed || !strings.Contains(stdout, c.want) || !strings.Contains(stdout, p+": no site can run the job") {
			t.Errorf("%s: exit %d, stdout %q; want exit 1 and %q", c.name, code, stdout, c.want)
		}
	}
	// JSON says which files are infeasible; an invalid file wins (exit 2).
	bad := writeJob(t, d, "bad.yaml", "name: b\nresources: {nodes: 1, walltime: 1h}\n")
	code, stdout, _ := cli("validate", "-o", "json", bad, filepath.Join(d, "nosplit.yaml"))
	var res []struct {
		File       string   `json:"file"`
		Valid      bool     `json:"valid"`
		Infeasible bool     `json:"infeasible"`
		Errors     []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != exitUsage || len(res) != 2 || res[0].Infeasible || !res[1].Infeasible {
		t.Errorf("json: exit %d %v %s", code, err, stdout)
	}
}

// The embedded broker refuses an infeasible job at submission with the
// same reason, exit 1, nothing run.
func TestEmbeddedSubmitRefusesInfeasible(t *testing.T) {
	d := t.TempDir()
	p := writeJob(t, d, "late.yaml", "name: d\ncommand: [x]\nresources: {nodes: 1, walltime: 5h}\nscheduling: {deadline: +1h}\n")
	code, stdout, stderr := cli(p, "--out-dir", filepath.Join(d, "out"))
	if code != exitJobFailed || stdout != "" || !strings.Contains(stderr, "cannot meet its deadline") {
		t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}

// Feasible is pure: the table of its rules.
func TestFeasibleRules(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sites := configSites(mustConfig(t))
	for _, c := range []struct {
		name string
		req  bridge.Request
		want string
	}{
		{"fits", bridge.Request{Nodes: 224, Estimate: time.Hour}, ""},
		{"too wide", bridge.Request{Nodes: 225, Estimate: time.Hour}, "needs 225 nodes; the eligible sites have 224"},
		{"split meets deadline", bridge.Request{Nodes: 200, Estimate: time.Hour, Deadline: now.Add(67 * time.Minute)}, ""},
		{"split misses deadline", bridge.Request{Nodes: 200, Estimate: time.Hour, Deadline: now.Add(65 * time.Minute)}, "takes 1h6m0s"},
		{"allowed only", bridge.Request{Nodes: 40, Estimate: time.Hour, Sites: []string{"Harbin"}}, "needs 40 nodes; the eligible sites have 32"},
		// A reservation's size is its admission test's to judge (stored, listed).
		{"reservation size", bridge.Request{Nodes: 130, Estimate: time.Hour, Window: &bridge.Window{Earliest: now, Latest: now.Add(2 * time.Hour)}}, ""},
		{"reservation gpus", bridge.Request{Nodes: 1, GPUsPerNode: 1, Estimate: time.Hour, Window: &bridge.Window{Earliest: now, Latest: now.Add(2 * time.Hour)}}, "no GPUs"},
		{"memory", bridge.Request{Nodes: 1, Estimate: time.Hour, MemPerNode: 1 << 40}, "Harbin: 16GiB memory per node, the job asks 1TiB"},
	} {
		_, err := bridge.Feasible(&c.req, &policy.Snapshot{Now: now, Sites: sites, MultiSite: 1.1})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A site not known yet (Nodes 0: a real site not asked) rules nothing out.
	sites[0].Nodes, sites[0].Shape.Cores = 0, 0
	if _, err := bridge.Feasible(&bridge.Request{Nodes: 1000, CoresPerNode: 64, Estimate: time.Hour}, &policy.Snapshot{Now: now, Sites: sites, MultiSite: 1.1}); err != nil {
		t.Errorf("unknown site: %v", err)
	}
}

func mustConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load(os.Getenv("GRIDSUB_CONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
