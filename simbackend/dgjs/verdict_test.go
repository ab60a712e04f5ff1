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
	if v := Compare(a, b, true).Verdict(); v != "reversed" {
		t.Fatalf("lower is better: %s", v)
	}
	b[3] = 0.95 // one loss: 9 of 10 still holds
	if p := Compare(a, b, false); p.Verdict() != "holds" || p.Wins != 9 || p.Losses != 1 {
		t.Fatalf("9 of 10: %+v %s", p, p.Verdict())
	}
	b[4] = 0.9 // a tie counts against
	if v := Compare(a, b, false).Verdict(); v != "within noise" {
		t.Fatalf("8 wins, 1 tie, 1 loss: %s", v)
	}
	if v := Compare(a[:5], b[:5], false).Verdict(); v != "too few seeds" {
		t.Fatalf("5 seeds: %s", v)
	}
	if s := Summary([]string{"holds", "holds"}); s != "holds" {
		t.Fatal(s)
	}
	if s := Summary([]string{"holds", "within noise", "reversed"}); s != "mixed: holds at 1, reversed at 1, within noise at 1 of 3 points" {
		t.Fatal(s)
	}
}
