package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestShippedExperiments parses every file of configs/experiments.
func TestShippedExperiments(t *testing.T) {
	files, _ := filepath.Glob("../../configs/experiments/*.yaml")
	if len(files) < 9 {
		t.Fatalf("found %d experiment files, want fig2..fig9 and ctc-easy-reference", len(files))
	}
	for _, f := range files {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("\nkind: paper003\n")) {
			continue // simbackend/experiment/paper003 reads (and tests) these
		}
		e, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(e.Plots) == 0 || len(e.Expand()) == 0 {
			t.Errorf("%s: %d plots, %d runs", f, len(e.Plots), len(e.Expand()))
		}
	}
}
