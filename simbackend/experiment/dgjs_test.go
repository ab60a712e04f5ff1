package experiment

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/simbackend/faults"
)

// TestDGJSExperimentsBounded is the suite's bounded variant of paper 004's
// figure set: each shipped paper004 file, cut to 40 and 80 jobs and 3
// seeds, through Execute and WriteAll; the metrics are consistent with
// their per-seed values and the tables do not depend on the worker count.
func TestDGJSExperimentsBounded(t *testing.T) {
	for _, fig := range []struct {
		file, level string
		shape       float64
	}{{"paper004-low-failure.yaml", "low", 0.873}, {"paper004-high-failure.yaml", "high", 0.871}} {
		f := fig.file
		e, err := Load(filepath.Join("../../configs/experiments", f))
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != KindDGJS || e.DGJS.Seeds < 10 {
			t.Fatalf("%s: kind %s with %d seeds; the figures need >= 10 seeds per point", f, e.Kind, e.DGJS.Seeds)
		}
		// What the file's comment says.
		d := e.DGJS
		if len(d.Failure) != 1 || d.Failure[0] != fig.level || d.Resources[0] != 20 || d.ArrivalPerMin[0] != 0.4 ||
			d.Run[0] != "5m" || d.Run[1] != "20m" || d.Seeds != 10 {
			t.Fatalf("%s: %+v does not match its comment", f, d)
		}
		m, _ := e.failureModel(fig.level)
		if want, _ := faults.Paper004(fig.level); m != want || m.Shape != fig.shape || m.Theta != 127*time.Second || m.Beta != 0.76 || m.Omega != 0.87 {
			t.Fatalf("%s: failure model %+v", f, m)
		}
		e.DGJS.Jobs, e.DGJS.Seeds = []int{40, 80}, 3
		var csvs [][]byte
		for _, w := range []int{1, 2} {
			s, err := Execute(context.Background(), e, Options{Workers: w})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Runs) != 2*len(e.Policies) {
				t.Fatalf("%s: %d runs, want 2 jobs x %d policies", f, len(s.Runs), len(e.Policies))
			}
			for _, r := range s.Runs {
				m := r.Metrics
				sum := 0.0
				for k := range 3 {
					v := m["success_ratio_s"+strconv.Itoa(k)]
					if v < 0 || v > 1 {
						t.Fatalf("%s run %d: success ratio %v", f, r.Index, v)
					}
					sum += v
				}
				if math.Abs(sum/3-m["success_ratio"]) > 1e-12 || m["seeds"] != 3 {
					t.Fatalf("%s run %d: mean %v of per-seed values %v", f, r.Index, m["success_ratio"], sum/3)
				}
				if m["success_ratio"] > 0 && !(m["mean_completion"] >= 5*0.5) {
					t.Fatalf("%s run %d: mean completion %v min, below the shortest possible job", f, r.Index, m["mean_completion"])
				}
				if strings.HasPrefix(r.Params.Policy, "dgjs") && m["tier_high"]+m["tier_low"]+m["tier_none"] != float64(r.Params.Jobs) {
					t.Fatalf("%s run %d: tiers %v %v %v for %d jobs", f, r.Index, m["tier_high"], m["tier_low"], m["tier_none"], r.Params.Jobs)
				}
			}
			dir := t.TempDir()
			files, err := WriteAll(dir, s)
			if err != nil {
				t.Fatal(err)
			}
			cmp := 0
			if len(e.Compare) > 0 {
				cmp = 2 // compare.csv and compare.md
			}
			if len(files) != 2+cmp+2*len(e.Plots) {
				t.Fatalf("wrote %v", files)
			}
			b, _ := os.ReadFile(filepath.Join(dir, ResultsFile))
			csvs = append(csvs, b)
		}
		if !bytes.Equal(csvs[0], csvs[1]) {
			t.Fatalf("%s: results.csv differs between 1 and 2 workers", f)
		}
	}
}

func TestDGJSParseDefaults(t *testing.T) {
	e, err := Parse("d.yaml", []byte("name: d\nkind: dgjs\ndgjs: {jobs: [10, 20], failure: [low, high]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := e.DGJS
	if d.Seeds != 10 || d.Resources[0] != 20 || d.ArrivalPerMin[0] != 0.4 || d.Lambda != 1.5 || len(e.Policies) != 3 {
		t.Fatalf("defaults: %+v %v", d, e.Policies)
	}
	runs := e.Expand()
	if len(runs) != 12 || runs[1].Params != (Params{Failure: "low", Resources: 20, Arrival: 0.4, Policy: "dgjs", Jobs: 20}) {
		t.Fatalf("runs: %d, %+v", len(runs), runs[1].Params)
	}
	if got := ParamNames(KindDGJS); len(got) != 5 || got[4] != "jobs" {
		t.Fatalf("params %v", got)
	}
}

// TestDGJSReadmeExample parses the dgjs example of README.md.
func TestDGJSReadmeExample(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "```yaml\nname: paper004-high")
	if i < 0 {
		t.Fatal("README.md has no dgjs example")
	}
	s = s[i+len("```yaml\n"):]
	s = s[:strings.Index(s, "```")]
	e, err := Parse("README.md", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != KindDGJS || len(e.Expand()) != 3*4 || e.DGJS.Failures["mine"].RatePerMin != 0.5 {
		t.Fatalf("README example read as %+v", e.DGJS)
	}
	if _, err := e.failureModel("mine"); err != nil {
		t.Fatal(err)
	}
}
