package bridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// dataSite is a fake site that holds files (backends.DataHolder) and, at
// Submit, keeps the content of every staged input (the spool files are
// gone once the cycle's submissions are done).
type dataSite struct {
	*fakeSite
	mu      sync.Mutex
	files   map[string][]byte
	readErr error
	reads   int
	links   []string // "path -> remote" per LinkData
	staged  map[string][]byte
}

func newDataSite(name string, files map[string][]byte) *dataSite {
	return &dataSite{fakeSite: newFake(name, 4), files: files, staged: map[string][]byte{}}
}

func (d *dataSite) ReadData(_ context.Context, p string, dst io.Writer, limit int64) (backends.Transfer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reads++
	if d.readErr != nil {
		return backends.Transfer{}, d.readErr
	}
	b, ok := d.files[p]
	if !ok {
		return backends.Transfer{}, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if int64(len(b)) > limit {
		return backends.Transfer{}, fmt.Errorf("%w: %s is %d bytes, over the limit of %d", backends.ErrInvalidSpec, p, len(b), limit)
	}
	n, err := dst.Write(b)
	sum := sha256.Sum256(b)
	return backends.Transfer{Bytes: int64(n), Duration: time.Millisecond, SHA256: hex.EncodeToString(sum[:])}, err
}

func (d *dataSite) LinkData(_ context.Context, _ *backends.JobSpec, p, remote string) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.files[p]
	if !ok {
		return 0, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	d.links = append(d.links, p+" -> "+remote)
	return int64(len(b)), nil
}

func (d *dataSite) Submit(ctx context.Context, s *backends.JobSpec) (backends.JobID, error) {
	d.mu.Lock()
	for _, in := range s.Inputs {
		b, err := os.ReadFile(in.Local)
		if err != nil {
			d.mu.Unlock()
			return "", err
		}
		d.staged[in.Remote] = b
	}
	d.mu.Unlock()
	return d.fakeSite.Submit(ctx, s)
}

func dataBroker(t *testing.T, place int, sites ...*dataSite) *Broker {
	t.Helper()
	var sc []SiteConfig
	for _, s := range sites {
		sc = append(sc, SiteConfig{Name: s.name, Backend: s, H: 1})
	}
	b, err := New(Options{Sites: sc, Planner: scriptPlanner{onSite(place)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dataReq(ins ...backends.SiteFile) Request {
	r := req(1)
	r.SiteInputs = ins
	return r
}

func TestSiteInputsValidation(t *testing.T) {
	a, bs := newDataSite("A", nil), newDataSite("B", nil)
	b := dataBroker(t, 0, a, bs)
	good := backends.SiteFile{Site: "A", Path: "data/x", Size: 10}
	for _, c := range []struct {
		name string
		mod  func(*Request)
		want string
	}{
		{"unknown site", func(r *Request) { r.SiteInputs[0].Site = "Z" }, `SiteInputs[0].Site: unknown site "Z" (known sites: A, B)`},
		{"absolute", func(r *Request) { r.SiteInputs[0].Path = "/etc/passwd" }, "SiteInputs[0].Path: must be relative to the site's remote_dir"},
		{"escaping", func(r *Request) { r.SiteInputs[0].Path = "data/../../x" }, "SiteInputs[0].Path: \"data/../../x\" escapes the site's remote_dir"},
		{"hidden", func(r *Request) { r.SiteInputs[0].Path = ".ssh/id_ed25519" }, `SiteInputs[0].Path: ".ssh/id_ed25519" names the hidden ".ssh"`},
		{"no size", func(r *Request) { r.SiteInputs[0].Size = 0 }, "SiteInputs[0].Size: must be 1 .. 70368744177664 bytes"},
		{"absurd size", func(r *Request) { r.SiteInputs[0].Size = 1 << 50 }, "SiteInputs[0].Size: must be 1 .. 70368744177664 bytes"},
		{"two sites", func(r *Request) {
			r.SiteInputs = append(r.SiteInputs, backends.SiteFile{Site: "B", Path: "y", Size: 1})
		}, "SiteInputs[1].Site: all inputs that lie at a site must lie at the same one"},
		{"same remote", func(r *Request) {
			r.SiteInputs = append(r.SiteInputs, backends.SiteFile{Site: "A", Path: "other/x", Size: 1})
		}, `SiteInputs[1].Remote: "x" is already the remote name of another input`},
		{"origin elsewhere", func(r *Request) { r.Origin = "B" }, "Origin: is B, but the inputs lie at A"},
		{"other data size", func(r *Request) { r.Origin, r.DataSize = "A", 11 }, "DataSize: is 11 bytes, but the inputs that lie at A declare 10"},
	} {
		r := dataReq(good)
		c.mod(&r)
		_, err := b.Submit(context.Background(), r, t0)
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrBadRequest containing %q", c.name, err, c.want)
		}
	}
	// A good one sets the data's origin and size for the planner.
	j, err := b.Submit(context.Background(), dataReq(good, backends.SiteFile{Site: "A", Path: "y", Size: 5, Remote: "in/y"}), t0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Req.Origin != "A" || j.Req.DataSize != 15 || j.Req.SiteInputs[0].Remote != "x" {
		t.Fatalf("origin %q size %d remote %q; want A, 15, x", j.Req.Origin, j.Req.DataSize, j.Req.SiteInputs[0].Remote)
	}
}

// The job runs at B: the file is read once from A, staged at B as an
// ordinary input with the same bytes, and the spool is gone afterwards.
// At A it is linked in place and nothing is read.
func TestSiteInputsRelayAndInPlace(t *testing.T) {
	content := bytes.Repeat([]byte("gridsub"), 1000)
	a, bs := newDataSite("A", map[string][]byte{"data/x": content}), newDataSite("B", nil)
	b := dataBroker(t, 1, a, bs)
	j, err := b.Submit(context.Background(), dataReq(backends.SiteFile{Site: "A", Path: "data/x", Size: 7000, Remote: "in/x"}), t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	got, _ := b.Job(j.ID)
	if got.State != Dispatched || !bytes.Equal(bs.staged["in/x"], content) || a.reads != 1 {
		t.Fatalf("relay: state %s, staged %d bytes at B, %d reads at A; want dispatched, 7000, 1", got.State, len(bs.staged["in/x"]), a.reads)
	}
	spec := bs.specs["1"]
	if _, err := os.Stat(spec.Inputs[0].Local); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("spool file %s left behind: %v", spec.Inputs[0].Local, err)
	}
	if !hasEvent(got, "data", "A:data/x relayed through the broker as in/x (6.8 KiB read") {
		t.Errorf("events: %+v", got.Events)
	}

	a2 := newDataSite("A", map[string][]byte{"data/x": content})
	b2 := dataBroker(t, 0, a2, newDataSite("B", nil))
	j, err = b2.Submit(context.Background(), dataReq(backends.SiteFile{Site: "A", Path: "data/x", Size: 7000, Remote: "in/x"}), t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b2, t0)
	got, _ = b2.Job(j.ID)
	if got.State != Dispatched || a2.reads != 0 || len(a2.links) != 1 || a2.links[0] != "data/x -> in/x" || len(a2.specs["1"].Inputs) != 0 {
		t.Fatalf("in place: state %s, reads %d, links %v, inputs %v", got.State, a2.reads, a2.links, a2.specs["1"].Inputs)
	}
}

// A dropped link leaves the job queued (and it goes once the link is
// back); a missing file fails it naming site and path; a file larger
// than declared is refused. No site hears of a job whose data failed.
func TestSiteInputsFailures(t *testing.T) {
	a, bs := newDataSite("A", map[string][]byte{"data/x": []byte("12345")}), newDataSite("B", nil)
	b := dataBroker(t, 1, a, bs)
	ctx := context.Background()
	a.readErr = fmt.Errorf("%w: connection lost", backends.ErrUnavailable)
	j, err := b.Submit(ctx, dataReq(backends.SiteFile{Site: "A", Path: "data/x", Size: 5}), t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	got, _ := b.Job(j.ID)
	if got.State != Queued || !hasEvent(got, "retry-later", "input A:data/x") || len(bs.specs) != 0 {
		t.Fatalf("link drop: state %s, %d submissions, events %+v", got.State, len(bs.specs), got.Events)
	}
	a.readErr = nil
	mustCycle(t, b, t0.Add(time.Second))
	if got, _ = b.Job(j.ID); got.State != Dispatched {
		t.Fatalf("after the link is back: %s", got.State)
	}
	for _, c := range []struct {
		in   backends.SiteFile
		want string
	}{
		{backends.SiteFile{Site: "A", Path: "data/none", Size: 5}, "input A:data/none: data/none: file does not exist (not retryable)"},
		{backends.SiteFile{Site: "A", Path: "data/x", Size: 4}, "input A:data/x: invalid job spec: data/x is 5 bytes, over the limit of 4"},
	} {
		n := len(bs.specs)
		j, err := b.Submit(ctx, dataReq(c.in), t0)
		if err != nil {
			t.Fatal(err)
		}
		mustCycle(t, b, t0.Add(2*time.Second))
		got, _ := b.Job(j.ID)
		if got.State != Failed || !strings.Contains(got.Reason, c.want) || len(bs.specs) != n {
			t.Errorf("%+v: state %s reason %q, %d new submissions; want failed with %q", c.in, got.State, got.Reason, len(bs.specs)-n, c.want)
		}
	}
}

// Measured links to the broker make the site-to-site cost of the relay:
// both legs in sequence.
func TestSiteLinksFromMeasurements(t *testing.T) {
	var seen [][]policy.Link
	dec := func(s *policy.Snapshot, j policy.Job) *policy.Decision {
		seen = s.Links
		return nil
	}
	b, err := New(Options{Sites: []SiteConfig{{Name: "M", Backend: measuredSite{newFake("M", 4)}}, {Name: "N", Backend: measuredSite{newFake("N", 4)}},
		{Name: "C", Backend: newFake("C", 4)}}, Planner: scriptPlanner{dec},
		Links: [][]policy.Link{{{}, {SecPerByte: 1}, {SecPerByte: 2}}, {{SecPerByte: 1}, {}, {SecPerByte: 3}}, {{SecPerByte: 2}, {SecPerByte: 3}, {}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(context.Background(), req(1), t0); err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	relay := policy.Link{SecPerByte: 2e-6, Latency: 60 * time.Millisecond}
	if seen[0][1] != relay || seen[1][0] != relay || seen[0][2].SecPerByte != 2 || seen[2][1].SecPerByte != 3 || seen[0][0] != (policy.Link{}) {
		t.Fatalf("links %v; want M<->N measured (%v), the configured ones to C", seen, relay)
	}
}
