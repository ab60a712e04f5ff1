package dependable

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestPredictorLifecycle(t *testing.T) {
	p, err := NewPredictor(Config{Threshold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Reliability("A", epoch, time.Hour); r != 1 {
		t.Fatalf("unknown site: r = %v, want 1", r)
	}
	at := func(m int) time.Time { return epoch.Add(time.Duration(m) * time.Minute) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Observe("A", Up, at(0)))
	must(p.Observe("A", Down, at(100))) // TTF 100
	if r := p.Reliability("A", at(101), time.Minute); r != 0 {
		t.Fatalf("down site: r = %v, want 0", r)
	}
	if rc := p.RC("A", at(101), time.Hour); rc != time.Hour {
		t.Fatalf("down site: RC = %v, want the whole CT", rc)
	}
	must(p.Observe("A", Up, at(130)))   // repaired: up since 130
	must(p.Observe("A", Fail, at(230))) // TTF 100 again: job lost, still up
	// Up since 230, one state S=100 min (visits 2, n_00 = 1).
	if r := p.Reliability("A", at(240), 80*time.Minute); r != 1 {
		t.Errorf("age 10 + 80 < 100: r = %v, want 1", r)
	}
	if r := p.Reliability("A", at(240), 95*time.Minute); r != 0 {
		t.Errorf("age 10 + 95 > 100: r = %v, want 0", r)
	}
	if rc := p.RC("A", at(240), 95*time.Minute); rc != 95*time.Minute {
		t.Errorf("RC = %v, want 95m", rc)
	}
	err = p.Observe("A", Down, at(200))
	if !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("older observation: %v, want ErrOutOfOrder", err)
	}
	if err := p.Observe("", Up, at(300)); !errors.Is(err, ErrBadEvent) {
		t.Fatalf("empty site: %v", err)
	}
	if err := p.Observe("A", Event(9), at(300)); !errors.Is(err, ErrBadEvent) {
		t.Fatalf("bad event: %v", err)
	}
	v := p.Sites()
	if len(v) != 1 || v[0].Failures != 2 || v[0].MTTF != 100*time.Minute || !v[0].Up || !v[0].Since.Equal(at(230)) {
		t.Fatalf("Sites() = %+v", v)
	}
	if _, err := NewPredictor(Config{MaxStates: -1}); !errors.Is(err, ErrBadState) {
		t.Fatalf("bad config: %v", err)
	}
}

type obs struct {
	site string
	ev   Event
	at   time.Time
}

func drawObs(t *rapid.T) []obs {
	n := rapid.IntRange(0, 60).Draw(t, "n")
	now := epoch
	var out []obs
	for range n {
		now = now.Add(time.Duration(rapid.Int64Range(0, int64(10*time.Hour)).Draw(t, "gap")))
		out = append(out, obs{
			site: rapid.SampledFrom([]string{"A", "B", "C"}).Draw(t, "site"),
			ev:   rapid.SampledFrom([]Event{Up, Down, Fail}).Draw(t, "ev"),
			at:   now,
		})
	}
	return out
}

func feed(t *rapid.T, cfg Config, os []obs) *Predictor {
	p, err := NewPredictor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range os {
		if err := p.Observe(o.site, o.ev, o.at); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestPropertyPredictor: r lies in [0,1] and never grows with d; RC lies in
// [0, CT]; equal observations give equal predictions and bytes; a
// marshalled predictor reads back to the same predictions and bytes; an
// out-of-order observation changes nothing.
func TestPropertyPredictor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			Threshold: time.Duration(rapid.Int64Range(1, int64(5*time.Hour)).Draw(t, "threshold")),
			MaxStates: rapid.IntRange(1, 8).Draw(t, "maxStates"),
		}
		os := drawObs(t)
		p := feed(t, cfg, os)
		q := feed(t, cfg, os)
		b1, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		b2, _ := json.Marshal(q)
		if !bytes.Equal(b1, b2) {
			t.Fatal("equal observations gave different state")
		}
		var back Predictor
		if err := json.Unmarshal(b1, &back); err != nil {
			t.Fatalf("unmarshal own output: %v", err)
		}
		b3, _ := json.Marshal(&back)
		if !bytes.Equal(b1, b3) {
			t.Fatalf("round trip changed the state:\n%s\n%s", b1, b3)
		}
		last := epoch
		if len(os) > 0 {
			last = os[len(os)-1].at
		}
		at := last.Add(time.Duration(rapid.Int64Range(0, int64(20*time.Hour)).Draw(t, "later")))
		for _, s := range []string{"A", "B", "C", "D"} {
			prev := 2.0
			for _, d := range []time.Duration{0, time.Minute, time.Hour, 3 * time.Hour, 10 * time.Hour, 100 * time.Hour} {
				r := p.Reliability(s, at, d)
				if r < 0 || r > 1 || r > prev {
					t.Fatalf("site %s d %v: r = %v (previous %v)", s, d, r, prev)
				}
				prev = r
				if r2 := back.Reliability(s, at, d); r2 != r {
					t.Fatalf("restored predictor: r = %v, want %v", r2, r)
				}
				if rc := p.RC(s, at, d); rc < 0 || rc > d {
					t.Fatalf("RC %v outside [0, %v]", rc, d)
				}
			}
		}
		if len(os) > 0 && last.After(epoch) {
			site := os[len(os)-1].site
			if err := p.Observe(site, Down, epoch.Add(-time.Second)); !errors.Is(err, ErrOutOfOrder) {
				t.Fatalf("out of order: %v", err)
			}
			b4, _ := json.Marshal(p)
			if !bytes.Equal(b1, b4) {
				t.Fatal("a refused observation changed the state")
			}
		}
		for _, v := range p.Sites() {
			if v.Failures > 0 && len(v.States) == 0 || len(v.States) > cfg.MaxStates {
				t.Fatalf("site %s: %d states for %d failures (max %d)", v.Site, len(v.States), v.Failures, cfg.MaxStates)
			}
		}
	})
}

func TestUnmarshalRejects(t *testing.T) {
	good := func() map[string]any {
		return map[string]any{"version": 1, "threshold_ns": 60e9, "max_states": 4, "sites": map[string]any{
			"A": map[string]any{"up": true, "since": "2026-01-01T00:00:00Z", "last": "2026-01-01T01:00:00Z",
				"ttf_ns": []float64{3.6e12, 7.2e12}, "visits": []int{1, 2}, "trans": [][]int{{0, 1}, {1, 0}}, "current": 1},
		}}
	}
	site := func(m map[string]any) map[string]any { return m["sites"].(map[string]any)["A"].(map[string]any) }
	cases := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"version", func(m map[string]any) { m["version"] = 2 }, "version 2"},
		{"threshold", func(m map[string]any) { m["threshold_ns"] = 0 }, "threshold_ns"},
		{"too many states", func(m map[string]any) { m["max_states"] = 1 }, "2 states, max_states is 1"},
		{"visits size", func(m map[string]any) { site(m)["visits"] = []int{1} }, "1 visit counts"},
		{"row size", func(m map[string]any) { site(m)["trans"] = [][]int{{0}, {1, 0}} }, "trans[0] has 1 entries"},
		{"negative ttf", func(m map[string]any) { site(m)["ttf_ns"] = []float64{-1, 2} }, "ttf_ns[0]"},
		{"zero visits", func(m map[string]any) { site(m)["visits"] = []int{0, 1} }, "visits[0] = 0"},
		{"negative count", func(m map[string]any) { site(m)["trans"] = [][]int{{0, -1}, {1, 0}} }, "trans[0][1] = -1"},
		{"current", func(m map[string]any) { site(m)["current"] = 2 }, "current state 2"},
		{"no current with states", func(m map[string]any) { site(m)["current"] = -1 }, "current state -1"},
		{"since after last", func(m map[string]any) { site(m)["since"] = "2026-01-02T00:00:00Z" }, "last observation before since"},
		{"not json", nil, "invalid character"},
	}
	for _, c := range cases {
		var data []byte
		if c.edit == nil {
			data = []byte("{nope")
		} else {
			m := good()
			c.edit(m)
			data, _ = json.Marshal(m)
		}
		p, _ := NewPredictor(Config{})
		before, _ := json.Marshal(p)
		err := p.UnmarshalJSON(data)
		if !errors.Is(err, ErrBadState) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrBadState with %q", c.name, err, c.want)
		}
		if after, _ := json.Marshal(p); !bytes.Equal(before, after) {
			t.Errorf("%s: a refused state changed the predictor", c.name)
		}
	}
	m := good()
	data, _ := json.Marshal(m)
	var p Predictor
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("good state: %v", err)
	}
	// Up since 00:00, current state 1 (S=2h), row {1,0}: the successor is
	// S=1h. At 01:00 (age 1h) a job of 30m needs 1h30m > 1h → r = 0; at
	// 00:10 a job of 30m needs 40m < 1h → r = 1.
	if r := p.Reliability("A", epoch.Add(time.Hour), 30*time.Minute); r != 0 {
		t.Errorf("restored r = %v, want 0", r)
	}
	if r := p.Reliability("A", epoch.Add(10*time.Minute), 30*time.Minute); r != 1 {
		t.Errorf("restored r = %v, want 1", r)
	}
}
