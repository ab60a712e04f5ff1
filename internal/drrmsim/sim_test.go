package drrmsim

import (
	"os"
	"path/filepath"
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

func TestOSCQuick(t *testing.T) {
	jobs := oscJobs(t)
	for _, gap := range []float64{60, 300, 780} {
		w, err := NewOSC(OSC{Jobs: jobs, Quad: 32, Dual: 25, Share: 0.1, Gap: gap, Seed: 1, Requests: 0})
		if err != nil {
			t.Fatal(err)
		}
		for _, mech := range Mechanisms() {
			t0 := time.Now()
			r := run(t, w, mech, 1, nil)
			t.Logf("λ %3.0f %-6s req %d AP %.3f PP %.3f TPC %.0f bindfail %d  %v", gap, mech, r.Requests, r.AP(), r.PP(), r.TPC, r.BindFailed, time.Since(t0))
		}
	}
}
