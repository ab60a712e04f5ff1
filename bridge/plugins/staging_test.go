package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// TestIsolatedSLURMEnforcesStagingLimits: the staging limits travel in
// BackendConfig.Staging, so the built-in slurm backend run isolated
// refuses an input over staging.max_file_size exactly as in process
// (transport.ErrTooLarge, its identity kept across the boundary), and
// stages one under it. Against the real SLURM testbed.
func TestIsolatedSLURMEnforcesStagingLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: stages files to the real SLURM testbed")
	}
	spec, _ := slurmSpec(t, "siteA")
	spec.Config.Staging = &plugins.StagingConfig{MaxFileSize: 1000, MaxJobBytes: 1 << 20, MinRate: 1 << 20, MinTime: time.Minute}
	inst, err := plugins.LoadBackend(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Kill()
	dir := t.TempDir()
	big, small := filepath.Join(dir, "big.dat"), filepath.Join(dir, "small.dat")
	os.WriteFile(big, make([]byte, 4096), 0o644)
	os.WriteFile(small, make([]byte, 500), 0o644)
	stamp := time.Now().UnixNano() % 1_000_000_000
	job := func(n int, in string) backends.JobSpec {
		return backends.JobSpec{GridID: fmt.Sprintf("stl-%d-%d", stamp, n), Name: "staging-limit", Components: 1, Nodes: 1,
			Command: []string{"/bin/true"}, Walltime: time.Minute, Inputs: []backends.StageFile{{Local: in, Remote: "in.dat"}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = inst.Backend.Submit(ctx, ptr(job(1, big)))
	if !errors.Is(err, transport.ErrTooLarge) || !errors.Is(err, backends.ErrInvalidSpec) || !strings.Contains(err.Error(), "1000 bytes") {
		t.Fatalf("a 4096-byte input with max_file_size 1000: %v, want transport.ErrTooLarge naming the limit", err)
	}
	id, err := inst.Backend.Submit(ctx, ptr(job(2, small)))
	if err != nil {
		t.Fatalf("a 500-byte input with max_file_size 1000: %v", err)
	}
	if err := inst.Backend.Cancel(ctx, id); err != nil && !errors.Is(err, backends.ErrUnknownJob) {
		t.Logf("cancel %s: %v", id, err)
	}
}

func ptr[T any](v T) *T { return &v }
