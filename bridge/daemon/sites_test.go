package daemon_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/assemble/fakesite"
	"github.com/gridsub/gridsub/bridge/daemon"
)

// fakeSites are two real-kind sites backed by simulated ones (so no SSH is
// needed): Remote measures its link and fails on demand; Other never does.
func fakeSites(fail *atomic.Bool) assemble.Spec {
	return fakesite.Spec(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
		fakesite.Site{Name: "Remote", Kind: "fake", Nodes: 8, Cores: 2, H: 1.25, Wrap: func(b backends.Backend) backends.Backend {
			return fakesite.Measured{Flaky: fakesite.Flaky{Backend: b, Down: fail}, SecPerByte: 1e-6, Latency: 20 * time.Millisecond}
		}},
		fakesite.Site{Name: "Other", Kind: "fake", Nodes: 4, Cores: 2, H: 1.25})
}

// siteNamed polls GET /v1/sites until ok accepts the named site's record.
func siteNamed(t *testing.T, c *api.Client, name string, within time.Duration, ok func(api.Site) bool) api.Site {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := c.SiteStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Details {
			if s.Name == name && ok(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("site %s not as wanted after %s: %+v", name, within, r.Details)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The health task stores every probe: good numbers and the measured link,
// then a failure that keeps them beside its error; a restarted daemon
// serves the stored records before its first probe.
func TestHealthProbesPersist(t *testing.T) {
	state, sock := dirs(t)
	fail := new(atomic.Bool)
	opts := daemon.Options{Spec: fakeSites(fail), StateDir: state, Socket: sock,
		Cron: map[string]string{"cycle": "@every 1h", "health": "@every 100ms"}}
	d, err := daemon.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewUnixClient(sock)

	before := time.Now()
	r := siteNamed(t, c, "Remote", 10*time.Second, func(s api.Site) bool { return s.Status == api.SiteOK })
	if r.Kind != "fake" || r.Nodes != 8 || r.CoresPerNode != 2 || r.H != 1.25 || *r.FreeNodes != 8 || *r.Queued != 0 || *r.Running != 0 ||
		r.BandwidthBytesPerSecond == nil || *r.BandwidthBytesPerSecond != 1e6 || *r.LatencySeconds != 0.02 ||
		r.Trust != nil || r.LastProbe.Before(before.Add(-time.Second)) || !r.LastOK.Equal(*r.LastProbe) {
		t.Fatalf("Remote after a good probe: %+v", r)
	}
	o := siteNamed(t, c, "Other", 10*time.Second, func(s api.Site) bool { return s.Status == api.SiteOK })
	if o.BandwidthBytesPerSecond != nil || o.LatencySeconds != nil || *o.FreeNodes != 4 {
		t.Fatalf("Other (no link measured): %+v", o)
	}

	fail.Store(true)
	r = siteNamed(t, c, "Remote", 10*time.Second, func(s api.Site) bool { return strings.HasPrefix(s.Status, api.SiteUnreachable) })
	if r.Status != "unreachable: ssh: dial tcp 10.0.0.5:22: connect: connection refused" ||
		*r.FreeNodes != 8 || r.LastOK == nil || !r.LastOK.Before(*r.LastProbe) || *r.BandwidthBytesPerSecond != 1e6 {
		t.Fatalf("Remote after a failed probe (the last good numbers kept): %+v", r)
	}
	stop(t, d)

	// Restarted with the next probe an hour away: the stored records are
	// served as they were.
	opts.Spec = fakeSites(new(atomic.Bool))
	opts.Cron = map[string]string{"cycle": "@every 1h", "health": "@every 1h"}
	d2, err := daemon.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, d2)
	again, err := c.SiteStatus(context.Background())
	if err != nil || len(again.Details) != 2 {
		t.Fatalf("after restart: %+v, %v", again, err)
	}
	got := again.Details[0]
	if got.Name != "Remote" || got.Status != r.Status || !got.LastProbe.Equal(*r.LastProbe) || !got.LastOK.Equal(*r.LastOK) ||
		*got.FreeNodes != 8 || *got.BandwidthBytesPerSecond != 1e6 {
		t.Fatalf("after restart Remote is %+v, was %+v", got, r)
	}
}

// On the simulated testbed: every site probed, outcomes counted at the
// site where the job ran (a job whose command exited 3 is not the site's
// failure: not counted), trust not computed, no link measured.
func TestSitesOnTestbed(t *testing.T) {
	state, sock := dirs(t)
	start(t, state, sock, 600)
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	var ids []string
	for _, r := range okAndFailing() {
		j, err := c.Submit(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	waitState(t, c, ids[0], 15*time.Second, bridge.Completed)
	waitState(t, c, ids[1], 15*time.Second, bridge.Failed)
	want := map[string][2]int64{"Beijing": {0, 0}, "Shanghai": {0, 0}, "Harbin": {1, 0}}
	for name, n := range want {
		s := siteNamed(t, c, name, 10*time.Second, func(s api.Site) bool { return s.Status == api.SiteOK })
		if s.JobsCompleted != n[0] || s.JobsFailed != n[1] || s.Trust != nil || s.BandwidthBytesPerSecond != nil || s.Kind != "sim" {
			t.Errorf("%s: %+v, want %d completed, %d failed (site faults), no trust, no link", name, s, n[0], n[1])
		}
	}
}
