package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/store"
)

// reportingBroker is a storeBroker that reports its sites' health from a
// SQLite store, as the daemon does.
type reportingBroker struct {
	*storeBroker
	st  *store.SQLite
	err error // returned by SiteStatus when set
}

var _ api.SiteReporter = (*reportingBroker)(nil)

func (b *reportingBroker) SiteStatus(ctx context.Context) ([]api.Site, error) {
	if b.err != nil {
		return nil, b.err
	}
	recs, err := b.st.SiteHealth(ctx)
	if err != nil {
		return nil, err
	}
	var out []api.Site
	for _, name := range b.sites {
		var rec *store.SiteHealth
		for i := range recs {
			if recs[i].Site == name {
				rec = &recs[i]
			}
		}
		out = append(out, api.NewSite(name, "slurm", 0, 8, 1.5, rec))
	}
	return out, nil
}

func newReportingBroker(t *testing.T) *reportingBroker {
	b := newSQLiteBroker(t)
	b.sites = []string{"Beijing", "Shanghai", "Harbin"}
	return &reportingBroker{storeBroker: b, st: b.st.(*store.SQLite)}
}

// A broker that records no health answers the names as before, without
// details.
func TestSitesNamesOnly(t *testing.T) {
	c, _ := serveUnix(t, newSQLiteBroker(t))
	r, err := c.SiteStatus(context.Background())
	if err != nil || !slices.Equal(r.Sites, []string{"Beijing", "Shanghai"}) || r.Details != nil || r.Time.IsZero() {
		t.Fatalf("SiteStatus = %+v, %v; want the names, no details, a time", r, err)
	}
}

func TestSitesReportHealth(t *testing.T) {
	ctx := context.Background()
	b := newReportingBroker(t)
	p1 := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	p2 := p1.Add(time.Minute)
	for _, p := range []store.SiteProbe{
		{Site: "Beijing", Time: p2, Nodes: 128, FreeNodes: 100, Queued: 2, Running: 5,
			Link: &store.Link{BytesPerSec: 1e6, Latency: 575 * time.Millisecond}},
		{Site: "Shanghai", Time: p1, Nodes: 64, FreeNodes: 60, Queued: 0, Running: 1},
		{Site: "Shanghai", Time: p2, Err: "ssh: handshake failed: EOF"},
	} {
		if err := b.st.RecordProbe(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.st.SetTrust(ctx, "Beijing", 1.5, p2); err != nil {
		t.Fatal(err)
	}
	ended(t, b.st, "Shanghai")
	c, sock := serveUnix(t, b)

	r, err := c.SiteStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Sites, b.sites) || len(r.Details) != 3 {
		t.Fatalf("sites %v, %d details", r.Sites, len(r.Details))
	}
	bj, sh, hb := r.Details[0], r.Details[1], r.Details[2]
	if bj.Name != "Beijing" || bj.Status != "ok" || bj.Nodes != 128 || *bj.FreeNodes != 100 || *bj.Queued != 2 || *bj.Running != 5 ||
		*bj.BandwidthBytesPerSecond != 1e6 || *bj.LatencySeconds != 0.575 || *bj.Trust != 1.5 || !bj.LastProbe.Equal(p2) {
		t.Errorf("Beijing: %+v", bj)
	}
	if sh.Status != "unreachable: ssh: handshake failed: EOF" || sh.LastError != "ssh: handshake failed: EOF" ||
		!sh.LastProbe.Equal(p2) || !sh.LastOK.Equal(p1) || *sh.FreeNodes != 60 || sh.Nodes != 64 ||
		sh.Trust != nil || sh.BandwidthBytesPerSecond != nil || sh.JobsFailed != 1 || sh.JobsCompleted != 0 {
		t.Errorf("Shanghai (failed after a good probe): %+v", sh)
	}
	if hb.Status != "not probed yet" || hb.LastProbe != nil || hb.FreeNodes != nil || hb.Nodes != 0 || hb.Kind != "slurm" || hb.H != 1.5 {
		t.Errorf("Harbin (never probed): %+v", hb)
	}
	if d := time.Since(r.Time); d < 0 || d > time.Minute {
		t.Errorf("answer time %s is not the server's wall clock", r.Time)
	}

	// The wire form: what was never measured is null, not 0.
	raw := getJSON(t, sock, "/v1/sites")
	var wire struct {
		Details []map[string]any `json:"details"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"trust", "trust_computed_at", "bandwidth_bytes_per_second", "latency_seconds", "free_nodes", "last_probe"} {
		v, ok := wire.Details[2][k]
		if !ok || v != nil {
			t.Errorf("Harbin %s = %v (present %v), want null", k, v, ok)
		}
	}
	if v := wire.Details[1]["trust"]; v != nil {
		t.Errorf("Shanghai trust %v, want null (not computed)", v)
	}

	// A store that cannot be read: 503 with the sentinel across the socket.
	b.err = fmt.Errorf("%w: locked", store.ErrUnavailable)
	if _, err := c.SiteStatus(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("SiteStatus with the store unavailable: %v", err)
	}
	if _, err := c.Sites(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Sites with the store unavailable: %v", err)
	}
}

// ended stores a job that failed at the site, through the site's fault.
func ended(t *testing.T, s *store.SQLite, site string) {
	t.Helper()
	j := &bridge.Job{ID: "g000900", Req: req("x", 1), State: bridge.Failed, SiteFault: true, Comps: []bridge.Component{{Site: site, Nodes: 1}}}
	if err := s.Put(context.Background(), j); err != nil {
		t.Fatal(err)
	}
}

// getJSON GETs path over the unix socket and returns the body.
func getJSON(t *testing.T, sock, path string) []byte {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://gridsub" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", path, resp.StatusCode, err, b)
	}
	return b
}

func TestNewSiteDiscoversNodes(t *testing.T) {
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	s := api.NewSite("A", "slurm", 0, 4, 1, &store.SiteHealth{Site: "A", LastProbe: now, LastOK: now, Nodes: 12, FreeNodes: 3})
	if s.Nodes != 12 || s.Status != api.SiteOK || *s.FreeNodes != 3 {
		t.Fatalf("discovered: %+v", s)
	}
	s = api.NewSite("A", "slurm", 16, 4, 1, &store.SiteHealth{Site: "A", LastProbe: now, LastOK: now, Nodes: 12})
	if s.Nodes != 16 {
		t.Fatalf("configured nodes %d, want 16 (the configuration wins)", s.Nodes)
	}
	// A record with only outcome counts (no probe yet): not probed.
	s = api.NewSite("A", "sim", 8, 1, 1, &store.SiteHealth{Site: "A", Completed: 4})
	if s.Status != api.SiteNotProbed || s.JobsCompleted != 4 || s.LastProbe != nil || s.FreeNodes != nil {
		t.Fatalf("counted, never probed: %+v", s)
	}
}
