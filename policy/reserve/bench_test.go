package reserve

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchGraph admits synthetic requests (Poisson arrivals, gap 1 s, book-ahead
// 1–20 s, window 5–50 s, flexibility 0.5, levels 1–5) until n are admitted.
func benchGraph(b *testing.B, res []Resource, n int, maxWidth int) (*Graph, []Request) {
	rng := rand.New(rand.NewPCG(42, 1))
	g := New(res)
	now := t0
	mk := func(id string) Request {
		now = now.Add(time.Duration(rng.ExpFloat64() * float64(time.Second)))
		et := now.Add(sec(1 + rng.IntN(20)))
		win := sec(5 + rng.IntN(46))
		return Request{ID: id, ET: et, LT: et.Add(win), Dur: win / 2, Demand: 1 + rng.IntN(5), Width: 1 + rng.IntN(maxWidth)}
	}
	tries := 0
	for ; len(g.order) < n; tries++ {
		if tries > 20*n {
			b.Fatalf("only %d of %d admitted", len(g.order), n)
		}
		g.Admit(mk(fmt.Sprintf("q%d", tries)))
	}
	b.Logf("%d admitted of %d requests", n, tries)
	// probes spread over the admitted reservations' span
	var probes []Request
	start := now
	now = t0
	step := start.Sub(t0) / 100
	for i := range 100 {
		now = t0.Add(time.Duration(i) * step)
		probes = append(probes, mk(fmt.Sprintf("probe%d", i)))
	}
	return g, probes
}

func benchAdmit(b *testing.B, res []Resource, maxWidth int) {
	g, probes := benchGraph(b, res, 1000, maxWidth)
	admitted := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := probes[i%len(probes)]
		if ok, _ := g.Admit(q); ok {
			admitted++
			g.Remove(q.ID) // leave the graph as it was
		}
	}
	b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
}

// Admit (plus Remove when admitted) at 100 unit resources × 1,000 admitted
// reservations.
func BenchmarkAdmit100x1000(b *testing.B) { benchAdmit(b, resources100(1), 1) }

// The same with 64-node resources and widths 1–16.
func BenchmarkAdmit100x1000Wide(b *testing.B) { benchAdmit(b, resources100(64), 16) }

// resources100 is 100 resources of the given capacity at levels 1–5 drawn
// from a fixed seed.
func resources100(capacity int) []Resource {
	rng := rand.New(rand.NewPCG(7, 7))
	var res []Resource
	for i := range 100 {
		res = append(res, Resource{Name: fmt.Sprintf("r%d", i), Capacity: capacity, Level: 1 + rng.IntN(5)})
	}
	return res
}

// Bind in et order at 100 unit resources × 1,000 admitted reservations, each
// resource running one non-reserved job; the graph is rebuilt (untimed) every
// 500 binds.
func BenchmarkBind100x1000(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 7))
	var res []Resource
	var run []Running
	for i := range 100 {
		res = append(res, Resource{Name: fmt.Sprintf("r%d", i), Capacity: 1, Level: 1 + rng.IntN(5)})
		run = append(run, Running{Resource: res[i].Name, Job: fmt.Sprintf("j%d", i), Expected: sec(5 + rng.IntN(46)), Elapsed: sec(rng.IntN(5))})
	}
	var g *Graph
	var ids []string
	for i := 0; i < b.N; i++ {
		if len(ids) == 0 || len(ids) <= 500 {
			b.StopTimer()
			g, _ = benchGraph(b, res, 1000, 1)
			ids = g.Reservations()
			b.StartTimer()
		}
		id := ids[0]
		ids = ids[1:]
		if _, err := g.Bind(id, g.byID[id].q.ET, run); err != nil {
			b.Fatal(err)
		}
	}
}
