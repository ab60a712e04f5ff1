package bridge

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
)

// TestRealSlurmAccountInReason: on the real SLURM testbed with slurmdbd
// and enforced associations (siteA's login user may charge only account
// gridsub), a job naming another account for siteA is refused at
// submission with the field, the site and its accounts named; a job
// pinned to siteA configured with an account it lacks waits with the
// site's words as its reason, and nothing reaches the site.
func TestRealSlurmAccountInReason(t *testing.T) {
	key := os.Getenv("GRIDSUB_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_SITEA_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no SLURM testbed: source /var/tmp/gridsub-local-testbed/testbed.env (scripts/slurm-testbed.sh start)")
	}
	if os.Getenv("GRIDSUB_SITEA_ACCOUNTING") != "1" || os.Getenv("GRIDSUB_ACCOUNTING_ENFORCE") == "" {
		t.Skip("siteA has no enforced associations: start the testbed with GRIDSUB_SLURMDBD=1 GRIDSUB_ACCOUNTING_ENFORCE=associations")
	}
	user := os.Getenv("GRIDSUB_SSH_USER")
	ssh := transport.Config{Host: os.Getenv("GRIDSUB_SSH_HOST"), Port: port, User: user,
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")}, MaxSessions: 4}
	ctx := context.Background()
	connect := func(account string) *slurm.Backend {
		b, err := slurm.Connect(ctx, slurm.Config{Name: "siteA", Account: account, User: user, RemoteDir: os.Getenv("GRIDSUB_SITEA_SCRATCH")}, ssh)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	good := greedyBroker(t, NewMemStore(), true, connect(""), realRemapSite(t, "siteB"))
	r := req(1)
	r.Sites = []string{"siteA"}
	r.SiteOptions = map[string]SiteOptions{"siteA": {Account: "nosuch"}}
	_, err := good.Submit(ctx, r, time.Now())
	var fe *FieldError
	want := `site siteA has no account "nosuch" for its login user; it has: gridsub`
	if !errors.As(err, &fe) || fe.Field != `SiteOptions["siteA"].Account` || fe.Msg != want {
		t.Fatalf("a job naming an account siteA lacks: %v; want a FieldError on SiteOptions[\"siteA\"].Account: %s", err, want)
	}

	bad := connect("nosuch")
	b := greedyBroker(t, NewMemStore(), false, bad, realRemapSite(t, "siteB"))
	r = req(1)
	r.Sites = []string{"siteA"}
	j, err := b.Submit(ctx, r, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(context.Background(), j.ID, time.Now()) })
	mustCycle(t, b, time.Now())
	got, _ := b.Job(j.ID)
	want = `site siteA has no account "nosuch" (sites.siteA.account in the configuration); it has: gridsub`
	if got.State != Queued || !strings.Contains(got.Reason, want) || len(got.Comps) != 0 {
		t.Fatalf("pinned to the misconfigured site: %s, reason %q, components %v; want queued with %q", got.State, got.Reason, got.Comps, want)
	}
}
