package simbackend

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// A simulated job's output grows as it runs (a start line, then an end
// line), reads by offset, and ends as exactly what FetchOutputs writes.
func TestSiteReadLog(t *testing.T) {
	e, s := newTestSite(t, 4, EASYOptions{}, nil)
	mustSubmit(t, s, spec("blocker", 4, time.Minute, 10*time.Second)) // holds every node for 10 s
	id := mustSubmit(t, s, spec("grid-9", 2, time.Minute, 30*time.Second))
	if data, size, err := s.ReadLog(bg, id, nil, backends.StreamStdout, 0, 0); err != nil || len(data) != 0 || size != 0 {
		t.Fatalf("before it started: %q %d %v", data, size, err)
	}
	e.RunUntil(e.Now().Add(20 * time.Second))
	first, size, err := s.ReadLog(bg, id, nil, backends.StreamStdout, 0, 0)
	if err != nil || !strings.HasSuffix(string(first), "started on beijing nodes 2 at 2026-01-01T00:00:10Z (virtual time)\n") || int64(len(first)) != size {
		t.Fatalf("while running: %q %d %v", first, size, err)
	}
	e.Run()
	rest, size, err := s.ReadLog(bg, id, nil, backends.StreamStdout, int64(len(first)), 0)
	if err != nil || !strings.Contains(string(rest), "ran on beijing nodes 2 from 2026-01-01T00:00:10Z to 2026-01-01T00:00:40Z (virtual time), exit 0") ||
		int64(len(first)+len(rest)) != size {
		t.Fatalf("after the end, from offset %d: %q %d %v", len(first), rest, size, err)
	}
	dir := t.TempDir()
	if _, err := s.FetchOutputs(bg, id, nil, dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, backends.StdoutFile)); string(b) != string(first)+string(rest) {
		t.Errorf("fetched %q, followed %q", b, string(first)+string(rest))
	}
	if data, _, err := s.ReadLog(bg, id, nil, backends.StreamStdout, 5, 4); err != nil || string(data) != string(first[5:9]) {
		t.Errorf("4 bytes at 5: %q %v", data, err)
	}
	if data, _, err := s.ReadLog(bg, id, nil, backends.StreamStderr, 0, 0); err != nil || len(data) != 0 {
		t.Errorf("stderr of a clean job: %q %v", data, err)
	}
	if _, _, err := s.ReadLog(bg, id, nil, "stdin", 0, 0); !errors.Is(err, backends.ErrInvalidSpec) {
		t.Errorf("bad stream: %v", err)
	}
	if _, _, err := s.ReadLog(bg, "77", nil, backends.StreamStdout, 0, 0); !errors.Is(err, backends.ErrUnknownJob) {
		t.Errorf("unknown job: %v", err)
	}
}
