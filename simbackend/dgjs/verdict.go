package dgjs

import "fmt"

// Paired is the comparison of scheduler A with scheduler B at one point of
// an experiment, seed by seed (both saw the same jobs and failures).
type Paired struct {
	Wins, Losses, Ties int     // seeds where A is better, worse, equal
	MeanDiff           float64 // mean of A − B
}

// Compare pairs a[k] with b[k]; lowerIsBetter for times.
func Compare(a, b []float64, lowerIsBetter bool) Paired {
	var p Paired
	n := min(len(a), len(b))
	for k := range n {
		d := a[k] - b[k]
		p.MeanDiff += d / float64(n)
		if lowerIsBetter {
			d = -d
		}
		switch {
		case d > 0:
			p.Wins++
		case d < 0:
			p.Losses++
		default:
			p.Ties++
		}
	}
	return p
}

// MinWins is how many of 10 seeds A must win (ties count against) for "A
// is better" to hold at a point: a one-sided sign test at p ≈ 0.011. With
// n seeds it scales to ⌈0.9·n⌉.
const MinWins = 0.9

// Verdict of a claim "A is better than B" at one point: "holds" when A
// wins at least ⌈0.9·n⌉ of the n seeds, "reversed" when B does, else
// "within noise".
func (p Paired) Verdict() string {
	n := p.Wins + p.Losses + p.Ties
	need := int(MinWins*float64(n) + 0.999999)
	switch {
	case n >= 10 && p.Wins >= need:
		return "holds"
	case n >= 10 && p.Losses >= need:
		return "reversed"
	case n < 10:
		return "too few seeds"
	}
	return "within noise"
}

// Summary words a claim over all points: "holds" when it holds at every
// point, "does not hold" when it is reversed at every point, else it
// counts the points of each kind.
func Summary(vs []string) string {
	c := map[string]int{}
	for _, v := range vs {
		c[v]++
	}
	switch len(vs) {
	case c["holds"]:
		return "holds"
	case c["reversed"]:
		return "does not hold (reversed)"
	case c["within noise"]:
		return "within noise"
	}
	return fmt.Sprintf("mixed: holds at %d, reversed at %d, within noise at %d of %d points", c["holds"], c["reversed"], c["within noise"], len(vs))
}
