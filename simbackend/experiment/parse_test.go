package experiment

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseGood(t *testing.T) {
	e, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "full" || e.Kind != KindCoalloc || e.Workload.Jobs != 1000 || e.Workload.Shape != 2 || e.Workload.Seed != 42 {
		t.Fatalf("workload/name read wrong: %+v", e)
	}
	if e.Workload.ArrivalScale != 0.8 || e.Workload.MaxProcs != 338 || e.Workload.SizeMB[1] != 100 {
		t.Fatalf("workload numbers read wrong: %+v", e.Workload)
	}
	if len(e.Testbed.Sites) != 3 || *e.Testbed.Sites[0].H != 1.4 || e.Testbed.Sites[1].H != nil || *e.Testbed.P != 1.2 {
		t.Fatalf("testbed read wrong: %+v", e.Testbed)
	}
	if h, err := e.siteH("sites"); err != nil || h[0] != 1.4 || h[1] != 1 || h[2] != 0.6 {
		t.Fatalf("site h: %v %v", h, err)
	}
	if h, err := e.siteH("large"); err != nil || h[0] != 1.4 || h[2] != 0.6 {
		t.Fatalf("large h: %v %v", h, err)
	}
	if h, err := e.siteH("mine"); err != nil || h[0] != 1.2 {
		t.Fatalf("custom h: %v %v", h, err)
	}
	if got := e.Plots[0].Where["p"]; got != "1.0" {
		t.Fatalf("where p = %q", got)
	}
}

func TestParseDefaults(t *testing.T) {
	e, err := Parse("min.yaml", []byte("name: m\nworkload: {trace: X.swf}\npolicies: [greedy-easy]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Workload.Filter != "strong" || e.Workload.Shape != 1 || e.Workload.ArrivalScale != 1 ||
		e.Testbed.Bandwidth != "1MB/s" || e.Testbed.Latency != "575ms" || *e.Testbed.P != 1 || len(e.Testbed.Sites) != 3 {
		t.Fatalf("defaults: %+v %+v", e.Workload, e.Testbed)
	}
	runs := e.Expand()
	if len(runs) != 1 || runs[0].Params != (Params{Workload: 1, HSet: "sites", Bandwidth: "1MB/s", Policy: "greedy-easy", P: 1}) {
		t.Fatalf("runs %+v", runs)
	}
}

// TestParseBad reads each file of testdata/bad: its first line says
// "# want: LINE: TEXT" and the error must name that line and contain TEXT.
func TestParseBad(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) < 10 {
		t.Fatalf("only %d bad fixtures", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Scan()
			fh.Close()
			want, ok := strings.CutPrefix(sc.Text(), "# want: ")
			if !ok {
				t.Fatalf("first line %q has no '# want: '", sc.Text())
			}
			_, err = Load(f)
			if err == nil {
				t.Fatal("parsed without error")
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			if !strings.Contains(err.Error(), f+":"+want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s:%s", err, f, want)
			}
		})
	}
}

func TestParseSentinels(t *testing.T) {
	cases := map[string]error{
		"testdata/bad/unknown-top.yaml": ErrUnknownKey,
		"testdata/bad/bad-type.yaml":    ErrType,
		"testdata/bad/bad-syntax.yaml":  ErrSyntax,
		"testdata/bad/bad-p.yaml":       ErrValue,
	}
	for f, want := range cases {
		if _, err := Load(f); !errors.Is(err, want) {
			t.Errorf("%s: %v is not %v", f, err, want)
		}
	}
}

func TestExpandOrderAndSize(t *testing.T) {
	e, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runs := e.Expand()
	// 2 workloads × 3 h sets × 4 bandwidths × 4 policies × 3 p
	if len(runs) != 2*3*4*4*3 {
		t.Fatalf("%d runs", len(runs))
	}
	seen := map[Params]bool{}
	for i, r := range runs {
		if r.Index != i {
			t.Fatalf("run %d has index %d", i, r.Index)
		}
		if seen[r.Params] {
			t.Fatalf("run %+v twice", r.Params)
		}
		seen[r.Params] = true
	}
	// p varies fastest, the workload slowest.
	if runs[0].Params.P != 1.0 || runs[1].Params.P != 1.1 || runs[2].Params.P != 1.2 || runs[3].Params.Policy != "optimal-conservative" {
		t.Fatalf("order: %+v %+v %+v %+v", runs[0], runs[1], runs[2], runs[3])
	}
	if runs[len(runs)-1].Params != (Params{Workload: 2, HSet: "mine", Bandwidth: "10Kbps", Policy: "sabin", P: 1.2, Seed: 42}) {
		t.Fatalf("last run %+v", runs[len(runs)-1])
	}
	ref, err := Load("testdata/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if rr := ref.Expand(); len(rr) != 1 || rr[0].Params.Mode != ModeReference {
		t.Fatalf("reference runs %+v", rr)
	}
}

func TestParseBandwidth(t *testing.T) {
	cases := map[string]float64{"1MB/s": 1e6, "100KB/s": 1e5, "50KBps": 5e4, "10Kbps": 1250, "10Mbps": 1.25e6, "2.5 MB/s": 2.5e6}
	for in, want := range cases {
		if got, err := ParseBandwidth(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "10", "-1MB/s", "0KB/s", "fastMB/s"} {
		if _, err := ParseBandwidth(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
