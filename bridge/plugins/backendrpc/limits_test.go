package backendrpc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
)

// dirBytes is the number of files and bytes below dir.
func dirBytes(t *testing.T, dir string) (files int, n int64) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			files++
			n += fi.Size()
		}
		return nil
	})
	return files, n
}

// TestFetchOutputsBoundedOnTheHost: a plugin that ignores the staging
// limits (it sends files larger than max_file_size, more bytes than
// max_job_bytes, thousands of files) writes no more on the host than the
// limits allow; the fetch stops with ErrTooLarge naming the limit.
func TestFetchOutputsBoundedOnTheHost(t *testing.T) {
	var files, size int
	m := &mockFetch{fn: func(dir string) ([]string, error) {
		var got []string
		for i := range files {
			p := filepath.Join(dir, fmt.Sprintf("out%05d", i))
			if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
				return got, err
			}
			got = append(got, p)
		}
		return got, nil
	}}
	c, _ := plugins.TestBackendValue(t, m.backend())
	c.SetOutputLimits(backendrpc.OutputLimits{MaxFileSize: 256 << 10, MaxJobBytes: 1 << 20, MaxFiles: 50})
	for _, tc := range []struct {
		name        string
		files, size int
		limit       string
		maxFiles    int
		maxBytes    int64
	}{
		{"one file over max_file_size", 1, 1 << 20, "max_file_size", 0, 256 << 10},
		{"files over max_job_bytes", 8, 200 << 10, "max_job_bytes", 5, 1 << 20},
		{"too many files", 200, 10, "output files", 50, 50 * 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, size = tc.files, tc.size
			dir := t.TempDir()
			_, err := c.FetchOutputs(context.Background(), "1", nil, dir)
			if !errors.Is(err, transport.ErrTooLarge) || !strings.Contains(err.Error(), tc.limit) {
				t.Fatalf("FetchOutputs = %v, want ErrTooLarge naming %s", err, tc.limit)
			}
			n, b := dirBytes(t, dir)
			if n > tc.maxFiles || b > tc.maxBytes {
				t.Fatalf("the host holds %d files, %d bytes; the limits allow %d files, %d bytes", n, b, tc.maxFiles, tc.maxBytes)
			}
		})
	}
	files, size = 3, 100<<10 // under every limit
	if paths, err := c.FetchOutputs(context.Background(), "1", nil, t.TempDir()); err != nil || len(paths) != 3 {
		t.Fatalf("a fetch within the limits: %v %v", paths, err)
	}
}

// mockFetch is a backend whose FetchOutputs writes what fn writes.
type mockFetch struct {
	fn func(dir string) ([]string, error)
}

func (m *mockFetch) backend() backends.Backend {
	return &mock{name: "fetch", fetch: func(_ context.Context, _ backends.JobID, _ *backends.JobSpec, dir string) ([]string, error) {
		return m.fn(dir)
	}}
}
