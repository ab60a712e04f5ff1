package experiment

import (
	"errors"
	"slices"
	"testing"
)

// TestSubset: --seeds replaces the seeds, --workload keeps some of the
// file's workloads and drops the plots and comparisons pinned to the
// others; bad values are refused naming them.
func TestSubset(t *testing.T) {
	load := func() *Experiment {
		e, err := Load("../../configs/experiments/paper000-fig8-small-h-easy-vs-conservative.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := load()
	if n := len(e.Expand()); n != 10*2*2*7 {
		t.Fatalf("the file has %d runs", n)
	}
	if err := e.Subset([]uint64{7}, []int{2}); err != nil {
		t.Fatal(err)
	}
	runs := e.Expand()
	if len(runs) != 2*7 || runs[0].Params.Seed != 7 || runs[0].Params.Workload != 2 {
		t.Fatalf("%d runs, first %+v", len(runs), runs[0].Params)
	}
	if len(e.Plots) != 1 || e.Plots[0].Name != "fig8b" || len(e.Compare) != 1 || e.Compare[0].Name != "w2-awrt" {
		t.Fatalf("plots %+v compare %+v", e.Plots, e.Compare)
	}
	if err := load().Subset(nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		seeds []uint64
		wl    []int
	}{{[]uint64{7, 7}, nil}, {nil, []int{3}}, {nil, []int{1, 1}}} {
		if err := load().Subset(c.seeds, c.wl); !errors.Is(err, ErrValue) {
			t.Errorf("Subset(%v, %v) = %v, want ErrValue", c.seeds, c.wl, err)
		}
	}
	ref, err := Load("testdata/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Subset([]uint64{1}, nil); !errors.Is(err, ErrValue) {
		t.Errorf("reference kind: %v", err)
	}
	if !slices.Equal(load().axisSeed(), []uint64{7, 8, 9, 10, 11, 12, 13, 14, 15, 16}) {
		t.Error("Subset changed the loaded file")
	}
}
