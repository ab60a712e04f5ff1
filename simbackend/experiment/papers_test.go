package experiment

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gridsub/gridsub/simbackend/swf"
)

func execCSV(t *testing.T, e *Experiment, workers int) (*Summary, []byte) {
	t.Helper()
	s, err := Execute(context.Background(), e, Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	return s, b.Bytes()
}

func parseString(t *testing.T, src string) *Experiment {
	t.Helper()
	e, err := Parse("inline.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The kinds drrm and trust-minmin share worlds and learning sequences
// between runs (a memo): results.csv must still be the same bytes whatever
// the number of workers, and the same twice.
func TestPaperKindsDeterministic(t *testing.T) {
	files := map[string]string{
		"drrm": `name: d
kind: drrm
drrm: {set: synthetic, resources: [5, 10], requests: 60, flexibility: [0.1, 0.5], sigma: [0.3, 0.8], common: true, seeds: 3}
`,
		"trust": `name: t
kind: trust-minmin
trust: {tasks: [20, 30], runs: 6, migration: [one-by-one, bundle], seeds: 2}
`,
	}
	if _, ok := swf.WorkloadsDir(); ok {
		files["osc"] = `name: o
kind: drrm
drrm: {set: osc, requests: 50, gap: [120, 600], flexibility: [0, 0.5], common: true, seeds: 2}
`
	}
	for name, src := range files {
		t.Run(name, func(t *testing.T) {
			e := parseString(t, src)
			_, one := execCSV(t, e, 1)
			_, again := execCSV(t, parseString(t, src), 1)
			_, two := execCSV(t, parseString(t, src), 2)
			_, three := execCSV(t, parseString(t, src), 3)
			if !bytes.Equal(one, again) || !bytes.Equal(one, two) || !bytes.Equal(one, three) {
				t.Errorf("results.csv differs between runs or worker counts:\n1: %s\n2: %s", one, two)
			}
			if len(bytes.Split(bytes.TrimSpace(one), []byte("\n"))) != len(e.Expand())+1 {
				t.Errorf("results.csv has the wrong number of rows:\n%s", one)
			}
		})
	}
}

// metric returns a run's metric by its parameters.
func metric(t *testing.T, s *Summary, m string, where map[string]string) float64 {
	t.Helper()
	for _, r := range s.Runs {
		ok := true
		for k, v := range where {
			ok = ok && paramEqual(k, r.Params.Value(k), v)
		}
		if ok {
			return r.Metrics[m]
		}
	}
	t.Fatalf("no run matches %v", where)
	return 0
}

// TestPaperFiguresBounded is the CI variant of the shipped paper 001 and
// 002 figure files: each file as shipped but with three seeds (two for the
// OSC trace, on its first 150 reservations) and, for paper 002, 15 runs of
// the smallest task count. It checks the plots can be drawn and the
// directions that hold at any size: DRRM admits no more than SRRM and its
// TPC is lower, at every point of figures 3-8; Trust-Min-min's migration rate
// falls from the first runs to the last while the failures are skewed.
func TestPaperFiguresBounded(t *testing.T) {
	files, _ := filepath.Glob("../../configs/experiments/paper00[12]-*.yaml")
	if len(files) < 9 {
		t.Fatalf("found %d paper 001/002 files, want one per figure", len(files))
	}
	for _, f := range files {
		e, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case KindDRRM:
			e.DRRM.Seeds = 3
			if len(e.DRRM.Resources) > 4 {
				e.DRRM.Resources = []int{5, 25, 100}
			}
			if e.DRRM.Set == SetOSC {
				if _, ok := swf.WorkloadsDir(); !ok {
					continue
				}
				e.DRRM.Seeds, e.DRRM.Requests = 2, 100
				e.DRRM.Gap = e.DRRM.Gap[:min(2, len(e.DRRM.Gap))]
				e.DRRM.Flexibility = e.DRRM.Flexibility[:min(2, len(e.DRRM.Flexibility))]
			}
		case KindTrustMinMin:
			e.Trust.Tasks, e.Trust.Runs, e.Trust.Seeds = e.Trust.Tasks[:1], 15, 3
			for i := range e.Plots {
				if e.Plots[i].Where["run"] != "" {
					e.Plots[i].Where["run"] = "15"
				}
			}
		default:
			t.Fatalf("%s: kind %q", f, e.Kind)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := Execute(context.Background(), e, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := WritePlots(t.TempDir(), s); err != nil {
				t.Fatal(err)
			}
			if e.Kind == KindDRRM && e.DRRM.Set == SetSynthetic && len(e.DRRM.Sigma) == 0 {
				for _, r := range s.Runs {
					if r.Params.Policy != "DRRM" {
						continue
					}
					at := func(pol, m string) float64 {
						return metric(t, s, m, map[string]string{"res_number": strconv.Itoa(r.Params.ResNumber), "gap": fmt.Sprint(r.Params.Gap),
							"flexibility": fmt.Sprint(r.Params.Flexibility), "policy": pol})
					}
					for _, pol := range []string{"SRRM_r", "SRRM_m"} {
						if r.Metrics["tpc"] >= at(pol, "tpc") {
							t.Errorf("%+v: DRRM's TPC %.0f is not below %s's %.0f", r.Params, r.Metrics["tpc"], pol, at(pol, "tpc"))
						}
						if !e.DRRM.Common && r.Metrics["ap"] > at(pol, "ap") {
							t.Errorf("%+v: DRRM admits %.3f, more than %s's %.3f", r.Params, r.Metrics["ap"], pol, at(pol, "ap"))
						}
					}
				}
			}
			if e.Kind == KindTrustMinMin && e.Trust.FlakyWeight > 1 {
				for _, m := range e.Trust.Migration {
					first := metric(t, s, "migration_rate_mean", map[string]string{"policy": "trust-min-min", "run": "3", "migration": m})
					last := metric(t, s, "migration_rate", map[string]string{"policy": "trust-min-min", "run": "15", "migration": m})
					if !(last < first) {
						t.Errorf("%s: Trust-Min-min's migration rate went from %.3f (runs 1-3) to %.3f (run 15): want a fall", m, first, last)
					}
				}
			}
		})
	}
}

// Trust-Min-min runs as a planner in a trace replay (kind coalloc), with
// the testbed's local areas: every job runs, none is rejected, and the
// result does not depend on the worker count.
func TestTrustMinMinInReplay(t *testing.T) {
	needTraces(t)
	src := `name: tmm
workload: {trace: CTC-SP2-1996-3.1-cln.swf.gz, jobs: 300, width_cap: 32, seed: 7}
testbed:
  sites:
    - {name: Beijing, nodes: 128, area: north}
    - {name: Harbin, nodes: 32, area: north}
    - {name: Shanghai, nodes: 64, area: south}
  bandwidth: 100KB/s
policies: [trust-min-min, single-site-easy]
sweep: {p: [1.0]}
`
	s, one := execCSV(t, parseString(t, src), 1)
	_, two := execCSV(t, parseString(t, src), 2)
	if !bytes.Equal(one, two) {
		t.Errorf("results differ between 1 and 2 workers:\n%s\n%s", one, two)
	}
	r := s.Runs[0]
	if r.Params.Policy != "trust-min-min" || r.Metrics["ran"] != 300 || r.Metrics["rejected"] != 0 || r.Metrics["unfinished"] != 0 {
		t.Errorf("trust-min-min: %v", r.Metrics)
	}
	t.Logf("AWRT trust-min-min %.0f s, single-site-easy %.0f s", r.Metrics["awrt"], s.Runs[1].Metrics["awrt"])
}
