package dgjs

import "testing"

func TestVerdict(t *testing.T) {
	ten := func(v float64) []float64 {
		out := make([]float64, 10)
		for i := range out {
			out[i] = v
		}
		return out
	}
	a := ten(0.9)
	b := ten(0.8)
	if v := Compare(a, b, false).Verdict(); v != "holds" {
		t.Fatalf("better in every seed: %s", v)
	}
	if v := Compare(a, b, true).Verdict(); v != "does not hold" {
		t.Fatalf("lower is better: %s", v)
	}
	b[3] = 0.95 // one loss: 9 of 10 is within noise (the project's rule: every seed)
	if p := Compare(a, b, false); p.Verdict() != "within noise" || p.Wins != 9 || p.Losses != 1 {
		t.Fatalf("9 of 10: %+v %s", p, p.Verdict())
	}
	b[3] = 0.8
	b[4] = 0.9 // a tie counts against
	if p := Compare(a, b, false); p.Verdict() != "within noise" || p.Ties != 1 {
		t.Fatalf("9 wins, 1 tie: %+v %s", p, p.Verdict())
	}
	if p := Compare(b, a, true); p.Verdict() != "within noise" {
		t.Fatalf("9 wins, 1 tie, lower is better: %+v %s", p, p.Verdict())
	}
	if v := Compare(a[:5], b[:5], false).Verdict(); v != "too few seeds" {
		t.Fatalf("5 seeds: %s", v)
	}
	if s := Summary([]string{"holds", "holds"}); s != "holds" {
		t.Fatal(s)
	}
	if s := Summary([]string{"within noise", "within noise"}); s != "within noise" {
		t.Fatal(s)
	}
	if s := Summary([]string{"holds", "within noise", "does not hold"}); s != "holds at 1 of 3 points, within noise at 1, does not hold at 1" {
		t.Fatal(s)
	}
}
