package drrmsim

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gridsub/gridsub/simbackend/swf"
)

func synth(t testing.TB, mod func(*Synthetic)) *World {
	t.Helper()
	c := DefaultSynthetic()
	if mod != nil {
		mod(&c)
	}
	w, err := NewSynthetic(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func run(t testing.TB, w *World, mech string, seed uint64, f *Failure) Result {
	t.Helper()
	r, err := Run(w, mech, seed, f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The paper's headline point (25 resources, 200 requests, λ = 2,
// flexibility 0.1), ten seeds: DRRM admits fewer, and its TPC is below both
// SRRM variants' in every seed.
func TestDirectionTenSeeds(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		w := synth(t, func(c *Synthetic) { c.Seed = seed })
		d, r, m := run(t, w, DRRM, seed, nil), run(t, w, SRRMr, seed, nil), run(t, w, SRRMm, seed, nil)
		t.Logf("seed %2d AP %.2f %.2f %.2f  PP %.2f %.2f %.2f  TPC %5.0f %5.0f %5.0f  bindfail %d %d %d", seed,
			d.AP(), r.AP(), m.AP(), d.PP(), r.PP(), m.PP(), d.TPC, r.TPC, m.TPC, d.BindFailed, r.BindFailed, m.BindFailed)
		if d.Admitted > r.Admitted || d.Admitted > m.Admitted {
			t.Errorf("seed %d: DRRM admitted %d, more than SRRM_r %d or SRRM_m %d", seed, d.Admitted, r.Admitted, m.Admitted)
		}
		if d.TPC >= r.TPC || d.TPC >= m.TPC {
			t.Errorf("seed %d: DRRM's TPC %.0f not below SRRM_r's %.0f and SRRM_m's %.0f", seed, d.TPC, r.TPC, m.TPC)
		}
		if d.BindFailed > 0 {
			t.Errorf("seed %d: %d admitted DRRM reservations could not be bound", seed, d.BindFailed)
		}
		if d.Completed != d.Admitted || r.Completed+r.BindFailed != r.Admitted {
			t.Errorf("seed %d: reservations lost without a failure: DRRM %d of %d completed, SRRM_r %d+%d of %d", seed, d.Completed, d.Admitted, r.Completed, r.BindFailed, r.Admitted)
		}
	}
}

// Under a failure every admitted reservation either completes, fails with
// the resource, or fails to bind: none vanishes; and the same run is the
// same twice.
func TestFailureAccounting(t *testing.T) {
	w := synth(t, func(c *Synthetic) { c.Resources = 10 })
	for _, sigma := range []float64{0.1, 0.5, 0.9} {
		f := DrawFailure(w, sigma, 3)
		for _, mech := range Mechanisms() {
			r := run(t, w, mech, 3, &f)
			if r.Completed+r.Failed+r.BindFailed != r.Admitted {
				t.Errorf("σ %.1f %s: %d completed + %d failed + %d unbound != %d admitted", sigma, mech, r.Completed, r.Failed, r.BindFailed, r.Admitted)
			}
			again := run(t, w, mech, 3, &f)
			if again.TPC != r.TPC || again.Failed != r.Failed || again.Admitted != r.Admitted {
				t.Errorf("σ %.1f %s: two runs differ: %+v vs %+v", sigma, mech, r, again)
			}
		}
	}
}

func oscJobs(t testing.TB) []swf.Job {
	dir := os.Getenv("GRIDSUB_WORKLOADS")
	if dir == "" {
		t.Skip("GRIDSUB_WORKLOADS not set")
	}
	rd, err := swf.Open(filepath.Join(dir, "OSC-Clust-2000-3.1-cln.swf.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	jobs, err := swf.ReadJobs(rd, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// The OSC world: the trace's nodes, a tenth of the usable jobs as
// reservations of the three types, a job of t s on n CPUs holding a node of
// m CPUs for t·n/m, book-ahead half the window, the other jobs back to back
// on the nodes; and a short run under each mechanism keeps its books.
func TestOSCWorld(t *testing.T) {
	jobs := oscJobs(t)
	w, err := NewOSC(OSC{Jobs: jobs, Quad: 32, Dual: 25, Share: 0.1, Gap: 240, Flexibility: 0.5, Seed: 1, Requests: 120})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Res) != 57 || len(w.Reqs) != 120 || len(w.BG) != 57 {
		t.Fatalf("%d nodes, %d requests, %d queues", len(w.Res), len(w.Reqs), len(w.BG))
	}
	byID := map[string]swf.Job{}
	for _, j := range jobs {
		byID["j"+strconv.FormatInt(j.ID, 10)] = j
	}
	types := map[int]int{}
	for i, q := range w.Reqs {
		j := byID[q.ID]
		m := int64(2)
		switch len(q.Allowed) {
		case 32:
			m = 4
		case 25, 0:
		default:
			t.Fatalf("%s may use %d nodes", q.ID, len(q.Allowed))
		}
		types[len(q.Allowed)]++
		if want := time.Duration(j.Run*j.Width()) * time.Second / time.Duration(m); q.Dur != max(time.Second, want) {
			t.Errorf("%s: holds %v, want t·n/m = %d·%d/%d s", q.ID, q.Dur, j.Run, j.Width(), m)
		}
		if win := q.LT.Sub(q.ET); win < q.Dur || q.ET.Sub(w.At[i]) != win/2 {
			t.Errorf("%s: window %v for %v, book-ahead %v: want flexibility 0.5 and book-ahead half the window", q.ID, win, q.Dur, q.ET.Sub(w.At[i]))
		}
	}
	if types[32] == 0 || types[25] == 0 || types[0] == 0 {
		t.Errorf("reservation types %v: want quad (32 nodes), dual (25) and careless (any)", types)
	}
	for i, bg := range w.BG {
		for k := 1; k < len(bg); k++ {
			if !bg[k].Start.Equal(bg[k-1].Start.Add(bg[k-1].Len)) || bg[k].Expected != bg[k].Len {
				t.Fatalf("node %d job %d: not back to back or expected time differs from the run time", i, k)
			}
		}
	}
	for _, mech := range Mechanisms() {
		r := run(t, w, mech, 1, nil)
		if r.Requests != 120 || r.Completed+r.BindFailed != r.Admitted || r.Admitted == 0 {
			t.Errorf("%s: %+v", mech, r)
		}
	}
}
