package paper003

import (
	"path/filepath"
	"testing"
)

// BenchmarkBlindLargeData is the slowest run of the figure set: data-blind
// Min-min with 1 GB inputs (the grid drains slowly, so each mapping event
// maps hundreds of waiting tasks).
func BenchmarkBlindLargeData(b *testing.B) {
	s, err := Load(filepath.Join("..", "..", "..", "configs", "experiments", "paper003-data-aware.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	w := newWorld(s, 1)
	for i := 0; i < b.N; i++ {
		simulate(s, w, Heuristic{Name: "min-min", Blind: true}, 1000)
	}
}
