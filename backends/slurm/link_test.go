package slurm_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
)

// TestLinkEstimateFromStaging: after a job's input is staged over the real
// sshd, the backend reports a measured transfer cost (what the broker hands
// to the policies), and not before.
func TestLinkEstimateFromStaging(t *testing.T) {
	s := testSite(t, "siteA")
	ctx := context.Background()
	b, err := slurm.Connect(ctx, slurm.Config{Name: s.name, RemoteDir: s.scratch}, s.ssh)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, _, ok := b.LinkEstimate(); ok {
		t.Fatal("an estimate before any transfer")
	}
	in := filepath.Join(t.TempDir(), "in.dat")
	if err := os.WriteFile(in, make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := &backends.JobSpec{GridID: "linktest-" + time.Now().Format("150405.000000000"), Name: "link", Command: []string{"true"},
		Nodes: 1, Walltime: time.Minute, Inputs: []backends.StageFile{{Local: in, Remote: "in.dat"}}}
	id, err := b.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Cancel(ctx, id)
	spb, lat, ok := b.LinkEstimate()
	if !ok || spb <= 0 || spb > 1e-5 || lat < 0 || lat > 5*time.Second {
		t.Fatalf("estimate after staging 4 MiB: %g s/B, latency %s, ok %v", spb, lat, ok)
	}
	t.Logf("siteA from here: %.0f MB/s, latency %s", 1/spb/1e6, lat)
}
