package experiment

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Compare is one claim of the form "A's Y is lower (or higher) than B's",
// checked seed by seed at every x: A and B are two values of the parameter
// Of (usually two policies), the other parameters are pinned by Where, and
// the seeds are the repetitions: the runs of sweep.seed (kind coalloc), or
// the per-seed columns Y_s0, Y_s1, ... a run of the paper kinds carries
// beside its mean (drrm, trust-minmin, dgjs). compare.csv gets one row per
// x, and one row "all" over every x.
type Compare struct {
	Name  string            `yaml:"name" json:"name,omitempty"`
	Y     string            `yaml:"y" json:"y,omitempty"`         // a metric, e.g. awrt
	X     string            `yaml:"x" json:"x,omitempty"`         // a parameter, e.g. p
	Of    string            `yaml:"of" json:"of,omitempty"`       // the parameter A and B are values of
	A     string            `yaml:"a" json:"a,omitempty"`         // e.g. greedy-easy
	B     string            `yaml:"b" json:"b,omitempty"`         // e.g. single-site-easy
	Where map[string]string `yaml:"where" json:"where,omitempty"` // pins the other parameters
}

// Verdicts of a comparison row: the sign of A − B on every seed.
const (
	VerdictLower  = "lower"        // A < B on every seed
	VerdictHigher = "higher"       // A > B on every seed
	VerdictNoise  = "within noise" // the sign changes with the seed
)

// CompareRow is one x of a comparison. GapPct is 100·(MeanA − MeanB)/MeanB,
// Ratio MeanA/MeanB;
// ALower counts the seeds on which A's value is below B's, Seeds the seeds
// on which both ran.
type CompareRow struct {
	Compare      string
	X            string
	MeanA, MeanB float64
	GapPct       float64
	Ratio        float64 // MeanA / MeanB, 0 when MeanB is 0
	MinGapPct    float64 // the smallest and largest per-seed gap
	MaxGapPct    float64
	ALower       int
	AHigher      int
	Seeds        int
	Verdict      string
}

// Comparisons evaluates every Compare of the experiment over s's runs.
// A point missing A or B on a seed is left out of that seed's count.
func Comparisons(s *Summary) []CompareRow {
	var out []CompareRow
	for _, c := range s.Experiment.Compare {
		type key struct{ x, seed string }
		a, b := map[key]float64{}, map[key]float64{}
		var xs, seeds []string
		for _, r := range s.Runs {
			ok := true
			for k, v := range c.Where {
				ok = ok && paramEqual(k, r.Params.Value(k), v)
			}
			of := r.Params.Value(c.Of)
			if !ok || (of != c.A && of != c.B) {
				continue
			}
			x := r.Params.Value(c.X)
			if !slices.Contains(xs, x) {
				xs = append(xs, x)
			}
			for _, sv := range runSeeds(r, c.Y) {
				seed, v := sv.seed, sv.v
				k := key{x, seed}
				if !slices.Contains(seeds, k.seed) {
					seeds = append(seeds, k.seed)
				}
				if of == c.A {
					a[k] = v
				} else {
					b[k] = v
				}
			}
		}
		all := CompareRow{Compare: c.Name, X: "all"}
		for _, x := range xs {
			row := CompareRow{Compare: c.Name, X: x}
			for _, sd := range seeds {
				va, okA := a[key{x, sd}]
				vb, okB := b[key{x, sd}]
				if !okA || !okB {
					continue
				}
				row.add(va, vb)
				all.add(va, vb)
			}
			row.finish()
			out = append(out, row)
		}
		all.finish()
		out = append(out, all)
	}
	return out
}

// seedValue is one seed's value of a metric.
type seedValue struct {
	seed string
	v    float64
}

// runSeeds is a run's metric y by seed, in seed order (the means are sums
// in this order, so the same runs give the same bytes): the per-seed
// columns y_s0, y_s1, ... when the run has them, else the run's own value
// under its seed parameter.
func runSeeds(r Result, y string) []seedValue {
	var out []seedValue
	for k := 0; ; k++ {
		v, ok := r.Metrics[y+"_s"+strconv.Itoa(k)]
		if !ok {
			break
		}
		out = append(out, seedValue{"s" + strconv.Itoa(k), v})
	}
	if len(out) == 0 {
		out = append(out, seedValue{r.Params.Value("seed"), r.Metrics[y]})
	}
	return out
}

func (r *CompareRow) add(a, b float64) {
	gap := 0.0
	if b != 0 {
		gap = 100 * (a - b) / b
	}
	if r.Seeds == 0 || gap < r.MinGapPct {
		r.MinGapPct = gap
	}
	if r.Seeds == 0 || gap > r.MaxGapPct {
		r.MaxGapPct = gap
	}
	r.MeanA += a
	r.MeanB += b
	r.Seeds++
	switch {
	case a < b:
		r.ALower++
	case a > b:
		r.AHigher++
	}
}

func (r *CompareRow) finish() {
	if r.Seeds == 0 {
		r.Verdict = "no data"
		return
	}
	r.MeanA /= float64(r.Seeds)
	r.MeanB /= float64(r.Seeds)
	if r.MeanB != 0 {
		r.GapPct = 100 * (r.MeanA - r.MeanB) / r.MeanB
		r.Ratio = r.MeanA / r.MeanB
	}
	switch r.Seeds {
	case r.ALower:
		r.Verdict = VerdictLower
	case r.AHigher:
		r.Verdict = VerdictHigher
	default:
		r.Verdict = VerdictNoise
	}
}

// Files written by WriteAll when the experiment has comparisons.
const (
	CompareFile         = "compare.csv"
	CompareMarkdownFile = "compare.md"
)

// WriteCompareCSV writes the comparisons, one row per x (and "all").
func WriteCompareCSV(w io.Writer, rows []CompareRow) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"compare", "x", "mean_a", "mean_b", "gap_pct", "ratio", "min_gap_pct", "max_gap_pct", "a_lower", "a_higher", "seeds", "verdict"}); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	for _, r := range rows {
		if err := cw.Write([]string{r.Compare, r.X, FormatMetric(r.MeanA), FormatMetric(r.MeanB), f(r.GapPct), strconv.FormatFloat(r.Ratio, 'f', 3, 64), f(r.MinGapPct), f(r.MaxGapPct),
			strconv.Itoa(r.ALower), strconv.Itoa(r.AHigher), strconv.Itoa(r.Seeds), r.Verdict}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// CompareMarkdown renders the comparisons as one Markdown table per
// comparison: x, the two means, the gap of the means, the range of the
// per-seed gaps, on how many seeds A is lower, and the verdict.
func CompareMarkdown(e *Experiment, rows []CompareRow) string {
	var sb strings.Builder
	for _, c := range e.Compare {
		fmt.Fprintf(&sb, "%s: %s, %s vs %s", c.Name, c.Y, c.A, c.B)
		if len(c.Where) > 0 {
			keys := make([]string, 0, len(c.Where))
			for k := range c.Where {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(&sb, ", %s = %s", k, c.Where[k])
			}
		}
		fmt.Fprintf(&sb, "\n\n| %s | %s | %s | gap of means | ratio | per-seed gaps | %s lower on | %s higher on | verdict |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n", c.X, c.A, c.B, c.A, c.A)
		for _, r := range rows {
			if r.Compare != c.Name {
				continue
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %+.1f %% | %.2f× | %+.1f … %+.1f %% | %d/%d | %d/%d | %s |\n",
				r.X, meanText(r.MeanA), meanText(r.MeanB), r.GapPct, r.Ratio, r.MinGapPct, r.MaxGapPct, r.ALower, r.Seeds, r.AHigher, r.Seeds, r.Verdict)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// meanText prints a mean as a table shows it: whole numbers from 100 up
// (times in seconds), three significant digits below (shares such as AU).
func meanText(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// validateCompare checks the comparisons against the experiment's
// parameters, metrics and runs.
func (p *parser) validateCompare(e *Experiment) {
	if len(e.Compare) > 0 && e.Kind == KindCTCReference {
		p.at("compare", ErrValue, "not for kind %q (its runs have no seeds to compare)", e.Kind)
		return
	}
	params := ParamNames(e.Kind)
	metrics := e.MetricNames()
	names := map[string]bool{}
	for i, c := range e.Compare {
		f := fmt.Sprintf("compare[%d]", i)
		switch {
		case !nameRE.MatchString(c.Name):
			p.at(f+".name", ErrValue, "%q: a comparison needs a name of letters, digits, '.', '_' and '-'", c.Name)
		case names[c.Name]:
			p.at(f+".name", ErrValue, "%q: comparison names must be unique", c.Name)
		}
		names[c.Name] = true
		if !slices.Contains(metrics, c.Y) {
			p.at(f+".y", ErrValue, "%q: y is a metric: %s", c.Y, strings.Join(metrics, ", "))
		}
		if !slices.Contains(params, c.X) || c.X == "seed" {
			p.at(f+".x", ErrValue, "%q: x is a parameter other than seed: %s", c.X, strings.Join(params, ", "))
		}
		if !slices.Contains(params, c.Of) || c.Of == c.X || c.Of == "seed" {
			p.at(f+".of", ErrValue, "%q: of is a parameter other than x and seed: %s", c.Of, strings.Join(params, ", "))
			continue
		}
		vals := e.axisValues(c.Of)
		for _, ab := range []struct{ field, v string }{{"a", c.A}, {"b", c.B}} {
			if !slices.ContainsFunc(vals, func(have string) bool { return paramEqual(c.Of, have, ab.v) }) {
				p.at(f+"."+ab.field, ErrValue, "%s = %q matches no run; the runs have %s", c.Of, ab.v, strings.Join(vals, ", "))
			}
		}
		if c.A == c.B {
			p.at(f+".b", ErrValue, "%q: a and b must differ", c.B)
		}
		for _, k := range params {
			if k == c.X || k == c.Of || k == "seed" {
				continue
			}
			if v, ok := c.Where[k]; ok {
				if vs := e.axisValues(k); !slices.ContainsFunc(vs, func(have string) bool { return paramEqual(k, have, v) }) {
					p.at(f+".where."+k, ErrValue, "%s = %q matches no run; the runs have %s", k, v, strings.Join(vs, ", "))
				}
				continue
			}
			if vs := e.axisValues(k); len(vs) > 1 {
				p.at(f, ErrValue, "the runs differ in %s (%s): fix it under where, or the comparison would mix them", k, strings.Join(vs, ", "))
			}
		}
		for k := range c.Where {
			if !slices.Contains(params, k) || k == c.X || k == c.Of || k == "seed" {
				p.at(f+".where."+k, ErrValue, "%q: where pins a parameter other than x, of and seed: %s", k, strings.Join(params, ", "))
			}
		}
	}
}
