package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/simbackend/dgjs"
	"github.com/gridsub/gridsub/simbackend/drrmsim"
	"github.com/gridsub/gridsub/simbackend/faults"
)

// loadBuiltin starts the built-in name of kind out of process, as
// `gridsub plugin serve KIND NAME` of a freshly built, checksummed gridsub.
func loadBuiltin(t *testing.T, kind, name string) *policyrpc.Plugin {
	t.Helper()
	bin := buildBinary(t)
	p, err := policyrpc.Load(context.Background(), kind, policyrpc.Config{Path: bin,
		Args: []string{"plugin", "serve", kind, name}, SHA256: fileSHA256Hex(t, bin)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestReplayAdmissionOutOfProcess: paper 001's simulator gives the same
// result, field for field, with each built-in admission mechanism in
// process and out of process — with and without a resource failure, over
// several seeds. SRRM's booked starts cross the seam in Admit's reply
// (policy.BookedStart), so its reservations are bound when they were
// booked, not at their ET.
func TestReplayAdmissionOutOfProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and replays out of process")
	}
	for _, mech := range drrmsim.Mechanisms() {
		name := map[string]string{drrmsim.DRRM: "drrm", drrmsim.SRRMr: "srrm-random", drrmsim.SRRMm: "srrm"}[mech]
		t.Run(name, func(t *testing.T) {
			remote := loadBuiltin(t, plugins.KindAdmission, name).Policy().(policy.Admission)
			local, err := registry.Admission(name)
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(1); seed <= 3; seed++ {
				w, err := drrmsim.NewSynthetic(drrmsim.Synthetic{Resources: 6, Requests: 120, Gap: 2, Flexibility: 0.3, Levels: 2, Seed: seed,
					BookAhead: [2]int{1, 20}, Window: [2]int{5, 50}, Background: [2]int{5, 50}})
				if err != nil {
					t.Fatal(err)
				}
				for _, fail := range []*drrmsim.Failure{nil, {Sigma: 0.4, Resource: int(seed) % 6}} {
					byName, err := drrmsim.Run(w, mech, seed, fail)
					if err != nil {
						t.Fatal(err)
					}
					in, err := drrmsim.RunAdmission(w, local, seed, fail)
					if err != nil {
						t.Fatal(err)
					}
					out, err := drrmsim.RunAdmission(w, remote, seed, fail)
					if err != nil {
						t.Fatal(err)
					}
					a, b, c := jsonOf(t, byName), jsonOf(t, in), jsonOf(t, out)
					if a != b || b != c {
						t.Fatalf("seed %d, failure %v: results differ\nby name:        %s\nin process:     %s\nout of process: %s", seed, fail != nil, a, b, c)
					}
					if byName.Admitted == 0 {
						t.Fatalf("seed %d: nothing admitted: the comparison says nothing", seed)
					}
				}
			}
		})
	}
}

// TestReplayTieringOutOfProcess: paper 004's simulator gives the same
// result with the dgjs tier rule in process (the default) and served out
// of process.
func TestReplayTieringOutOfProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and replays out of process")
	}
	remote := loadBuiltin(t, plugins.KindTiering, "dgjs").Policy().(policy.Tiering)
	m, err := faults.Paper004("high")
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		cfg := dgjs.Config{Policy: dgjs.PolicyDGJS, Failure: m, Jobs: 150, Seed: seed}
		in, err := dgjs.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tiering = remote
		out, err := dgjs.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := jsonOf(t, in), jsonOf(t, out); a != b {
			t.Fatalf("seed %d: results differ\nin process:     %s\nout of process: %s", seed, a, b)
		}
		if in.Tiers[0] == 0 || in.Tiers[1] == 0 {
			t.Fatalf("seed %d: tiers %v: the jobs do not exercise the rule", seed, in.Tiers)
		}
	}
}

// TestSimNamesAdmissionAndTieringPlugins: experiment files name an
// admission plugin among paper 001's policies and a tiering plugin for
// paper 004, and `gridsub sim` gives the in-process numbers for them.
func TestSimNamesAdmissionAndTieringPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and runs two experiments")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	sim := func(name, yaml string) []byte {
		t.Helper()
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name)
		cmd := exec.Command(bin, "sim", f, "--out", out, "--workers", "2")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gridsub sim %s: %v\n%s", name, err, b)
		}
		b, err := os.ReadFile(filepath.Join(out, "results.csv"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	drrm := `name: adm
kind: drrm
drrm: {set: synthetic, resources: [6], requests: 100, gap: [2], flexibility: [0.2], sigma: [0.5], seeds: 3, seed: 1}
policies: [DRRM, SRRM_r, SRRM_m, "plugin:builtin:drrm", "plugin:builtin:srrm-random", "plugin:builtin:srrm"]
`
	rows, err := csv.NewReader(bytes.NewReader(sim("adm", drrm))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	pol := -1
	for i, h := range rows[0] {
		if h == "policy" {
			pol = i
		}
	}
	metrics := func(r []string) string { // every column but the run's label and timing
		var keep []string
		for i, v := range r {
			if h := rows[0][i]; i != pol && h != "run" && h != "index" && !strings.Contains(h, "wall") {
				keep = append(keep, h+"="+v)
			}
		}
		return strings.Join(keep, ",")
	}
	byPolicy := map[string]string{}
	for _, r := range rows[1:] {
		byPolicy[r[pol]] = metrics(r)
	}
	for mech, ref := range map[string]string{"DRRM": "plugin:builtin:drrm", "SRRM_r": "plugin:builtin:srrm-random", "SRRM_m": "plugin:builtin:srrm"} {
		if byPolicy[mech] == "" || byPolicy[mech] != byPolicy[ref] {
			t.Errorf("%s and %s differ:\n%s\n%s", mech, ref, byPolicy[mech], byPolicy[ref])
		}
	}
	const dg = `name: %s
kind: dgjs
dgjs: {jobs: [80], failure: [high], resources: [8], seeds: 2, seed: 3%s}
policies: [dgjs]
`
	in := sim("tier-in", strings.Replace(strings.Replace(dg, "%s", "tier", 1), "%s", "", 1))
	out := sim("tier-out", strings.Replace(strings.Replace(dg, "%s", "tier", 1), "%s", `, tiering: "plugin:builtin:dgjs"`, 1))
	if !bytes.Equal(in, out) {
		t.Fatalf("results.csv differs with the tier rule out of process:\n%s\n%s", in, out)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
