package experiment

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

const tinyDRRM = `name: tiny-drrm
kind: drrm
drrm: {set: synthetic, resources: [4], requests: 30, gap: [2, 6], flexibility: [0.1], seeds: 2, seed: 1}
policies: [DRRM, SRRM_r]
plots:
  - {name: ap, title: AP, x: gap, y: ap, series: [policy]}
`

// TestRunsAloneGatherToTheSameCSV: every run performed alone, carried
// through a run file and gathered in scrambled order gives results.csv
// byte for byte as Execute does.
func TestRunsAloneGatherToTheSameCSV(t *testing.T) {
	e, err := Parse("tiny.yaml", []byte(tinyDRRM))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Execute(context.Background(), e, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := WriteCSV(&want, s); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n := len(e.Expand())
	var results []Result
	for i := n - 1; i >= 0; i-- {
		r, err := ExecuteRun(context.Background(), e, i, false)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteRunFile(&b, e, r); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "run.json")
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		back, err := ReadRunFile(p, e, i)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, back)
		if i == 1 {
			if _, err := ReadRunFile(p, e, 0); !errors.Is(err, ErrValue) {
				t.Errorf("run 1's file read as run 0: %v", err)
			}
		}
	}
	g, err := Gather(e, results, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := WriteCSV(&got, g); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("gathered results.csv differs:\n%s\nlocal:\n%s", got.Bytes(), want.Bytes())
	}
	if _, err := Gather(e, results[1:], 1, 0); !errors.Is(err, ErrValue) {
		t.Errorf("a missing run gathered: %v", err)
	}
	if _, err := Gather(e, append(slices.Clone(results), results[0]), 1, 0); !errors.Is(err, ErrValue) {
		t.Errorf("a doubled run gathered: %v", err)
	}
	if _, err := ExecuteRun(context.Background(), e, n, false); !errors.Is(err, ErrValue) {
		t.Errorf("run %d of %d ran: %v", n, n, err)
	}
}

// TestRunFileKeepsEveryFloat: NaN, infinities and the last bit of a
// float64 survive the run file.
func TestRunFileKeepsEveryFloat(t *testing.T) {
	e, err := Parse("tiny.yaml", []byte(tinyDRRM))
	if err != nil {
		t.Fatal(err)
	}
	r := Result{Run: e.Expand()[0], Metrics: map[string]float64{"a": 0.1 + 0.2, "b": 1e-310, "c": posInf(), "d": negZero()}}
	var b bytes.Buffer
	if err := WriteRunFile(&b, e, r); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(p, b.Bytes(), 0o644)
	back, err := ReadRunFile(p, e, 0)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.Metrics {
		if FormatMetric(back.Metrics[k]) != FormatMetric(v) || (v == 0 && 1/back.Metrics[k] != 1/v) {
			t.Errorf("%s: %v came back as %v", k, v, back.Metrics[k])
		}
	}
	os.WriteFile(p, []byte(`{"format":"other"}`), 0o644)
	if _, err := ReadRunFile(p, e, 0); !errors.Is(err, ErrValue) {
		t.Errorf("a foreign file read: %v", err)
	}
}

func posInf() float64  { z := 0.0; return 1 / z }
func negZero() float64 { z := 0.0; return -z }
