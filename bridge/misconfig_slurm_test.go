package bridge

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
)

// TestRealSlurmMisconfigurationInReason: on the real SLURM testbed, a job
// pinned to a site configured with a partition the site does not have
// waits with the site's words as its reason (site, field, its partitions),
// not as "unreachable"; a job naming a partition its site lacks, accepted
// before the broker had seen the site, is rejected with the field named
// when the planner picks that site, and nothing reaches the site.
func TestRealSlurmMisconfigurationInReason(t *testing.T) {
	key := os.Getenv("GRIDSUB_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_SITEA_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no SLURM testbed: source /var/tmp/gridsub-local-testbed/testbed.env (scripts/slurm-testbed.sh start)")
	}
	ssh := transport.Config{Host: os.Getenv("GRIDSUB_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_SSH_USER"),
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")}, MaxSessions: 4}
	bad, err := slurm.Connect(context.Background(), slurm.Config{Name: "siteA", Partition: "nosuch", RemoteDir: os.Getenv("GRIDSUB_SITEA_SCRATCH")}, ssh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bad.Close() })
	b := greedyBroker(t, NewMemStore(), false, bad, realRemapSite(t, "siteB"))
	ctx := context.Background()
	r := req(1)
	r.Sites = []string{"siteA"}
	j, err := b.Submit(ctx, r, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r2 := req(1)
	r2.Sites = []string{"siteB"}
	r2.SiteOptions = map[string]SiteOptions{"siteB": {Partition: "gpu"}}
	j2, err := b.Submit(ctx, r2, time.Now()) // the broker has not asked siteB yet: not judged
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.Cancel(context.Background(), j.ID, time.Now())
		_ = b.Cancel(context.Background(), j2.ID, time.Now())
	})
	mustCycle(t, b, time.Now())
	got, _ := b.Job(j.ID)
	want := `site siteA has no partition "nosuch" (sites.siteA.partition in the configuration); it has: batch, debug`
	if got.State != Queued || !strings.Contains(got.Reason, want) {
		t.Fatalf("pinned to the misconfigured site: %s, reason %q; want queued with %q", got.State, got.Reason, want)
	}
	got, _ = b.Job(j2.ID)
	want = `SiteOptions["siteB"].Partition: site siteB has no partition "gpu"; it has: compute`
	if got.State != Rejected || !strings.Contains(got.Reason, want) || len(got.Comps) != 0 {
		t.Fatalf("a partition siteB lacks: %s, reason %q, components %v; want rejected naming %q, nothing submitted", got.State, got.Reason, got.Comps, want)
	}
}
