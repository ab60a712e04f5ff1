package store_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/store"
)

// health returns the store's record of one site, failing if there is none.
func health(t *testing.T, s store.SiteHealthStore, site string) store.SiteHealth {
	t.Helper()
	all, err := s.SiteHealth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range all {
		if h.Site == site {
			return h
		}
	}
	t.Fatalf("no record of %s in %+v", site, all)
	return store.SiteHealth{}
}

// A failed probe keeps the numbers of the last good one; a probe without a
// measured link keeps the last measured link; trust is nil until set; all
// of it survives a reopen.
func TestSiteHealthRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if all, err := s.SiteHealth(ctx); err != nil || len(all) != 0 {
		t.Fatalf("a new store has site records %+v, %v", all, err)
	}
	p1 := time.Date(2026, 11, 22, 6, 0, 0, 5, time.UTC)
	link := &store.Link{BytesPerSec: 1.25e6, Latency: 575 * time.Millisecond}
	if err := s.RecordProbe(ctx, store.SiteProbe{Site: "Beijing", Time: p1, Nodes: 128, FreeNodes: 100, Queued: 3, Running: 7, Link: link}); err != nil {
		t.Fatal(err)
	}
	h := health(t, s, "Beijing")
	if !h.LastProbe.Equal(p1) || !h.LastOK.Equal(p1) || h.LastErr != "" || h.Nodes != 128 || h.FreeNodes != 100 ||
		h.Queued != 3 || h.Running != 7 || h.Link == nil || *h.Link != *link || !h.LinkAt.Equal(p1) || h.Trust != nil || !h.TrustAt.IsZero() {
		t.Fatalf("after a good probe: %+v", h)
	}

	p2 := p1.Add(time.Minute)
	if err := s.RecordProbe(ctx, store.SiteProbe{Site: "Beijing", Time: p2, Err: "ssh: connect: connection refused",
		Nodes: 999, FreeNodes: 999}); err != nil {
		t.Fatal(err)
	}
	h = health(t, s, "Beijing")
	if !h.LastProbe.Equal(p2) || h.LastErr != "ssh: connect: connection refused" || !h.LastOK.Equal(p1) ||
		h.Nodes != 128 || h.FreeNodes != 100 || h.Queued != 3 || h.Running != 7 || h.Link == nil || *h.Link != *link {
		t.Fatalf("a failed probe must keep the last good numbers and the link: %+v", h)
	}

	// A site that never answered: an error and no numbers.
	if err := s.RecordProbe(ctx, store.SiteProbe{Site: "Harbin", Time: p2, Err: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if h := health(t, s, "Harbin"); !h.LastOK.IsZero() || h.LastErr != "timeout" || h.Link != nil || h.FreeNodes != 0 {
		t.Fatalf("never answered: %+v", h)
	}

	// A good probe again, nothing measured this time (a restarted backend):
	// the numbers are replaced, the error cleared, the old link kept.
	p3 := p2.Add(time.Minute)
	if err := s.RecordProbe(ctx, store.SiteProbe{Site: "Beijing", Time: p3, Nodes: 128, FreeNodes: 12, Queued: 40, Running: 9}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTrust(ctx, "Beijing", 0.75, p3); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h = health(t, s, "Beijing")
	if !h.LastOK.Equal(p3) || h.LastErr != "" || h.FreeNodes != 12 || h.Queued != 40 || h.Running != 9 ||
		h.Link == nil || *h.Link != *link || !h.LinkAt.Equal(p1) || h.Trust == nil || *h.Trust != 0.75 || !h.TrustAt.Equal(p3) {
		t.Fatalf("after reopen: %+v", h)
	}
	all, _ := s.SiteHealth(ctx)
	if len(all) != 2 || all[0].Site != "Beijing" || all[1].Site != "Harbin" {
		t.Fatalf("records %+v, want Beijing and Harbin by name", all)
	}
}

func TestSiteHealthRefusesBadInput(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	for what, p := range map[string]store.SiteProbe{
		"no site":        {Time: now},
		"no time":        {Site: "A"},
		"negative free":  {Site: "A", Time: now, FreeNodes: -1},
		"zero rate":      {Site: "A", Time: now, Link: &store.Link{}},
		"infinite rate":  {Site: "A", Time: now, Link: &store.Link{BytesPerSec: math.Inf(1)}},
		"negative delay": {Site: "A", Time: now, Link: &store.Link{BytesPerSec: 1, Latency: -time.Second}},
	} {
		if err := s.RecordProbe(ctx, p); !errors.Is(err, bridge.ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", what, err)
		}
	}
	for _, v := range []float64{-0.1, math.NaN(), math.Inf(1)} {
		if err := s.SetTrust(ctx, "A", v, now); !errors.Is(err, bridge.ErrBadRequest) {
			t.Errorf("trust %g: %v, want ErrBadRequest", v, err)
		}
	}
	if err := s.SetTrust(ctx, "A", 1, time.Time{}); !errors.Is(err, bridge.ErrBadRequest) {
		t.Errorf("trust without a time: %v", err)
	}
	if all, err := s.SiteHealth(ctx); err != nil || len(all) != 0 {
		t.Fatalf("refused writes left records: %+v, %v", all, err)
	}
}

// ended puts a job through queued, running and a final state at the given
// sites, Putting the final state twice (as the broker does when outputs
// are fetched after the end).
func ended(t *testing.T, s bridge.Store, id string, final bridge.JobState, sites ...string) {
	t.Helper()
	ctx := context.Background()
	j := &bridge.Job{ID: id, Req: bridge.Request{Name: id, Nodes: len(sites)}, State: bridge.Queued}
	if err := s.Put(ctx, j); err != nil {
		t.Fatal(err)
	}
	for _, site := range sites {
		j.Comps = append(j.Comps, bridge.Component{Site: site, Nodes: 1})
	}
	for _, st := range []bridge.JobState{bridge.Running, final, final} {
		j.State = st
		if err := s.Put(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
}

func outcomes(t *testing.T, s store.SiteHealthStore) map[string][2]int64 {
	t.Helper()
	all, err := s.SiteHealth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, h := range all {
		out[h.Site] = [2]int64{h.Completed, h.Failed}
	}
	return out
}

// Put counts each job's outcome once at each of its sites; a failure is
// counted against its sites only when it was theirs (bridge.Job.SiteFault):
// a command that failed or ran out of its walltime is not.
func TestOutcomeCounts(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	ended(t, s, "g1", bridge.Completed, "A")
	ended(t, s, "g2", bridge.Completed, "A", "B")
	ended(t, s, "g3", bridge.Failed, "B", "C") // its command failed: not the sites' doing
	ended(t, s, "g4", bridge.Cancelled, "C")
	ended(t, s, "g7", bridge.Timeout, "C")
	// A job stored for the first time already failed (no earlier Put),
	// through its site.
	if err := s.Put(ctx, &bridge.Job{ID: "g5", State: bridge.Failed, SiteFault: true,
		Comps: []bridge.Component{{Site: "A", Nodes: 1}, {Site: "A", Nodes: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, &bridge.Job{ID: "g6", State: bridge.Failed, SiteFault: true,
		Comps: []bridge.Component{{Site: "B", Nodes: 1}}}); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{"A": {2, 1}, "B": {1, 1}}
	if got := outcomes(t, s); len(got) != len(want) || got["A"] != want["A"] || got["B"] != want["B"] {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	// Pruning the history (timed-out jobs too) does not lower them.
	if n, err := s.Prune(ctx, time.Now().Add(time.Hour)); err != nil || n != 7 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	if got := outcomes(t, s); got["A"] != want["A"] {
		t.Fatalf("after prune %v, want %v", got, want)
	}
}

// A version-2 file (jobs and values, no site table) opens in this binary:
// migrated in place, the outcomes of the jobs already ended counted, every
// job and value intact, and site health usable.
func TestMigrateFromVersion2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v2.db")
	if err := store.CreateAtVersion(ctx, path, 2); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	// Rows as gridsub with schema 2 wrote them.
	if _, err := raw.Exec(`
		INSERT INTO jobs(seq, id, state, name, sites, updated, n_events, body) VALUES
			(1, 'g1', 'completed', 'a', 'A:1', 0, 0, '{"ID":"g1","State":"completed","Req":{"Name":"a","Nodes":1}}'),
			(2, 'g2', 'failed', 'b', 'A:1+B:1', 0, 0, '{"ID":"g2","State":"failed","Req":{"Name":"b","Nodes":2}}'),
			(3, 'g3', 'running', 'c', 'B:1', 0, 0, '{"ID":"g3","State":"running","Req":{"Name":"c","Nodes":1}}');
		INSERT INTO job_sites(site, seq) VALUES ('A', 1), ('A', 2), ('B', 2), ('B', 3);
		INSERT INTO kv(key, value, updated) VALUES ('broker.id_prefix', 'gold-', 0);
		UPDATE counters SET value = 300 WHERE name = 'next_id'`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatalf("opening a version-2 file: %v", err)
	}
	defer s.Close()
	if got := outcomes(t, s); len(got) != 2 || got["A"] != [2]int64{1, 1} || got["B"] != [2]int64{0, 1} {
		t.Fatalf("outcomes counted by the migration: %v, want A 1/1, B 0/1", got)
	}
	if h := health(t, s, "A"); !h.LastProbe.IsZero() || h.Link != nil || h.Trust != nil {
		t.Fatalf("a migrated site has health it never had: %+v", h)
	}
	if j, err := s.Get(ctx, "g3"); err != nil || j.State != bridge.Running {
		t.Fatalf("job g3 after migration: %+v, %v", j, err)
	}
	if v, ok, err := s.Value(ctx, "broker.id_prefix"); err != nil || !ok || string(v) != "gold-" {
		t.Fatalf("value after migration: %q %v %v", v, ok, err)
	}
	if n, err := s.NextID(ctx); err != nil || n != 301 {
		t.Fatalf("NextID after migration = %d, %v; want 301", n, err)
	}
	// The running job ends now: counted once more, on top of the backfill.
	j, _ := s.Get(ctx, "g3")
	j.State = bridge.Completed
	j.Comps = []bridge.Component{{Site: "B", Nodes: 1}}
	if err := s.Put(ctx, j); err != nil {
		t.Fatal(err)
	}
	if got := outcomes(t, s); got["B"] != [2]int64{1, 1} {
		t.Fatalf("B after g3 completed: %v, want 1/1", got["B"])
	}
	if err := s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: time.Now(), FreeNodes: 1, Nodes: 1}); err != nil {
		t.Fatalf("site health after migration: %v", err)
	}
	s.Close()
	if v := fileVersion(t, path); v != store.SchemaVersion {
		t.Fatalf("version after Open %d, want %d", v, store.SchemaVersion)
	}
}

// A file with site health whose schema is newer than this binary's is
// refused byte for byte untouched, and its site records are all there once
// the version is one this binary knows again.
func TestNewerSchemaKeepsSiteHealth(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	if err := s.RecordProbe(ctx, store.SiteProbe{Site: "A", Time: now, Nodes: 4, FreeNodes: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTrust(ctx, "A", 2.5, now); err != nil {
		t.Fatal(err)
	}
	s.Close()
	setVersion(t, path, store.SchemaVersion+1)
	untouched(t, path, store.ErrNewerSchema, "schema version "+strconv.Itoa(store.SchemaVersion+1), "upgrade gridsub")
	setVersion(t, path, store.SchemaVersion)
	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h := health(t, s, "A"); h.FreeNodes != 2 || h.Trust == nil || *h.Trust != 2.5 {
		t.Fatalf("after the refusal: %+v", h)
	}
}

// SetTrustRecent stores the score and the decayed counts together; they
// survive a reopen, and bad counts are refused without a trace.
func TestTrustRecentRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gridsub.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 6, 0, 0, 123, time.UTC)
	r := store.Recent{Completed: 3.25, Failed: 0.5, Outages: 1, At: now, Folded: store.Counts{Completed: 4, Failed: 1, Outages: 1}}
	if err := s.SetTrustRecent(ctx, "A", 0.8, r); err != nil {
		t.Fatal(err)
	}
	for what, bad := range map[string]store.Recent{
		"no time":         {Completed: 1},
		"negative":        {Failed: -1, At: now},
		"NaN":             {Outages: math.NaN(), At: now},
		"negative folded": {At: now, Folded: store.Counts{Completed: -1}},
	} {
		if err := s.SetTrustRecent(ctx, "B", 1, bad); !errors.Is(err, bridge.ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", what, err)
		}
	}
	if err := s.SetTrustRecent(ctx, "B", math.Inf(1), r); !errors.Is(err, bridge.ErrBadRequest) {
		t.Errorf("infinite trust: %v, want ErrBadRequest", err)
	}
	s.Close()
	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.SiteHealth(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("records %+v, %v; want A only (B's writes were all refused)", all, err)
	}
	h := all[0]
	if h.Trust == nil || *h.Trust != 0.8 || !h.TrustAt.Equal(now) || h.Recent == nil || *h.Recent != r {
		t.Fatalf("after reopen: trust %v at %v, recent %+v; want 0.8 at %v, %+v", h.Trust, h.TrustAt, h.Recent, now, r)
	}
}

// A version-4 file keeps its counts and trust; its sites have no decayed
// counts until the trust task first computes them.
func TestMigrateFromVersion4(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	if err := store.CreateAtVersion(ctx, path, 4); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO sites(name, completed, failed, outages, trust, trust_at) VALUES ('A', 5, 2, 1, 0.7, 1)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatalf("opening a version-4 file: %v", err)
	}
	defer s.Close()
	h := health(t, s, "A")
	if h.Completed != 5 || h.Failed != 2 || h.Outages != 1 || h.Trust == nil || *h.Trust != 0.7 || h.Recent != nil {
		t.Fatalf("after migration: %+v, recent %+v", h, h.Recent)
	}
	if v := fileVersion(t, path); v != store.SchemaVersion {
		t.Fatalf("version %d, want %d", v, store.SchemaVersion)
	}
}
