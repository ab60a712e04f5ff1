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

// MinSeeds is the fewest seeds a verdict is given on.
const MinSeeds = 10

// Verdict of a claim "A is better than B" at one point, by the project's
// rule: "holds" when A is better on every seed (at least MinSeeds), "does
// not hold" when B is better on every seed, else "within noise" (a tie
// counts against both directions). The cells of a claims table give the
// counts (wins/ties/losses).
func (p Paired) Verdict() string {
	n := p.Wins + p.Losses + p.Ties
	switch {
	case n < MinSeeds:
		return "too few seeds"
	case p.Wins == n:
		return "holds"
	case p.Losses == n:
		return "does not hold"
	}
	return "within noise"
}

// Summary words a claim over all points: "holds" when it holds at every
// point, "does not hold" when it does not at every point, "within noise"
// when it is within noise at every point, else the count of points of
// each kind ("holds at 4 of 6 points, within noise at 2").
func Summary(vs []string) string {
	c := map[string]int{}
	for _, v := range vs {
		c[v]++
	}
	switch len(vs) {
	case c["holds"], c["does not hold"], c["within noise"]:
		return vs[0]
	}
	out := fmt.Sprintf("holds at %d of %d points", c["holds"], len(vs))
	if n := c["within noise"]; n > 0 {
		out += fmt.Sprintf(", within noise at %d", n)
	}
	if n := c["does not hold"]; n > 0 {
		out += fmt.Sprintf(", does not hold at %d", n)
	}
	if n := c["too few seeds"]; n > 0 {
		out += fmt.Sprintf(", too few seeds at %d", n)
	}
	return out
}
