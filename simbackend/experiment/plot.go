package experiment

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// numericAxes are the parameters plotted on a linear axis; the others are
// categories in the order the runs meet them.
var numericAxes = map[string]bool{"p": true}

// logAxes are the parameters plotted on a logarithmic axis at their
// value (bandwidth in bytes/s), ticked at the values the runs have.
var logAxes = map[string]bool{"bandwidth": true}

// paramEqual compares a run's parameter with a Where value ("1.0" equals
// p = 1).
func paramEqual(name, have, want string) bool {
	if numericAxes[name] {
		a, err1 := strconv.ParseFloat(have, 64)
		b, err2 := strconv.ParseFloat(want, 64)
		return err1 == nil && err2 == nil && a == b
	}
	return have == want
}

// Line is one series of a plot: its label and its points in x order. A
// point that several seeds share (sweep.seed) is their mean, Lo and Hi the
// lowest and highest seed's value and N the number of seeds.
type Line struct {
	Label  string
	X      []float64
	Y      []float64
	Lo, Hi []float64
	N      []int
	Labels []string // x as text
}

// PlotData gathers a plot's lines from the runs: the runs matching Where,
// one line per combination of Series values, ordered by first appearance,
// the runs of several seeds at one x folded into their mean.
// Categories lists the x values (as text) in order.
func PlotData(pl Plot, s *Summary) (lines []Line, categories []string) {
	index := map[string]int{}
	folded := map[[2]int]bool{} // (line, point) summed over several runs (sweep.seed)
	for _, r := range s.Runs {
		ok := true
		for k, v := range pl.Where {
			if !paramEqual(k, r.Params.Value(k), v) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		var parts []string
		for _, k := range pl.Series {
			parts = append(parts, seriesPart(k, r.Params.Value(k)))
		}
		key := strings.Join(parts, ", ")
		i, seen := index[key]
		if !seen {
			i = len(lines)
			index[key] = i
			lines = append(lines, Line{Label: key})
		}
		xs := r.Params.Value(pl.X)
		if !slices.Contains(categories, xs) {
			categories = append(categories, xs)
		}
		x := float64(slices.Index(categories, xs))
		if numericAxes[pl.X] {
			x, _ = strconv.ParseFloat(xs, 64)
		}
		if logAxes[pl.X] {
			x, _ = ParseBandwidth(xs)
		}
		l := &lines[i]
		y := r.Metrics[pl.Y]
		if k := slices.Index(l.Labels, xs); k >= 0 { // another seed of the same point
			folded[[2]int{i, k}] = true
			l.Y[k] += y // a sum until the end
			l.Lo[k], l.Hi[k] = min(l.Lo[k], y), max(l.Hi[k], y)
			l.N[k]++
			continue
		}
		lo, hi, n := seedSpread(r.Metrics, pl.Y, y)
		l.X = append(l.X, x)
		l.Y = append(l.Y, y)
		l.Lo, l.Hi, l.N = append(l.Lo, lo), append(l.Hi, hi), append(l.N, n)
		l.Labels = append(l.Labels, xs)
	}
	for i := range lines {
		for k, n := range lines[i].N {
			if n > 1 && !folded[[2]int{i, k}] {
				continue // one run holding its seeds' mean (seedSpread)
			}
			lines[i].Y[k] /= float64(n)
		}
	}
	return lines, categories
}

// seedSpread is the spread of one run's metric y over its seeds when the
// kind reports them beside the mean (papers 001, 002 and 004: "tpc" and
// "tpc_s0" ... "tpc_s9"): the lowest and highest seed's value and the
// number of seeds. A run without such columns is one seed of its own.
func seedSpread(m map[string]float64, y string, mean float64) (lo, hi float64, n int) {
	lo, hi = mean, mean
	for k := 0; ; k++ {
		v, ok := m[y+"_s"+strconv.Itoa(k)]
		if !ok {
			break
		}
		if n == 0 {
			lo, hi = v, v
		}
		lo, hi, n = min(lo, v), max(hi, v), n+1
	}
	return lo, hi, max(n, 1)
}

func seriesPart(k, v string) string {
	switch k {
	case "workload":
		return "Workload " + v
	case "h_set":
		return v + " h"
	case "p":
		return "p=" + v
	}
	return v
}

// WritePlots draws every plot of the experiment as DIR/NAME.png and
// DIR/NAME.svg and returns the paths.
func WritePlots(dir string, s *Summary) ([]string, error) {
	var out []string
	for _, pl := range s.Experiment.Plots {
		p, err := drawPlot(pl, s)
		if err != nil {
			return out, fmt.Errorf("plot %s: %w", pl.Name, err)
		}
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, pl.Name+ext)
			if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
				return out, fmt.Errorf("plot %s: %w", pl.Name, err)
			}
			out = append(out, path)
		}
	}
	return out, nil
}

func drawPlot(pl Plot, s *Summary) (*plot.Plot, error) {
	lines, cats := PlotData(pl, s)
	if len(lines) == 0 {
		return nil, fmt.Errorf("no run matches %v", pl.Where)
	}
	p := plot.New()
	p.Title.Text = pl.Title
	if p.Title.Text == "" {
		p.Title.Text = pl.Name
	}
	p.X.Label.Text = paramLabels[pl.X]
	p.Y.Label.Text = metricLabel(pl.Y)
	p.Legend.Top = true
	// Inset from the right edge, so that the last sample (line and glyph)
	// is drawn whole inside the canvas.
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = -vg.Points(2)
	p.Add(plotter.NewGrid())
	seeds := 1
	for i, l := range lines {
		xys := make(plotter.XYs, len(l.X))
		for k := range l.X {
			xys[k] = plotter.XY{X: l.X[k], Y: l.Y[k]}
			seeds = max(seeds, l.N[k])
		}
		ln, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		c := plotutil.Color(i)
		ln.Color = c
		ln.Dashes = plotutil.Dashes(i)
		pts.Color = c
		pts.Shape = plotutil.Shape(i)
		p.Add(ln, pts)
		if seeds > 1 { // the spread over the seeds: a bar from the lowest to the highest
			bars, err := plotter.NewYErrorBars(spread{l})
			if err != nil {
				return nil, err
			}
			bars.Color = c
			p.Add(bars)
		}
		label := l.Label
		if label == "" {
			label = pl.Y
		}
		p.Legend.Add(label, ln, pts)
	}
	if seeds > 1 {
		p.Title.Text += fmt.Sprintf("\n(mean of %d seeds, bars: lowest to highest)", seeds)
	}
	switch {
	case logAxes[pl.X]:
		p.X.Scale = plot.LogScale{}
		var ticks []plot.Tick
		for _, c := range cats {
			if v, err := ParseBandwidth(c); err == nil {
				ticks = append(ticks, plot.Tick{Value: v, Label: c})
			}
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		lo, hi := ticks[0].Value, ticks[0].Value
		for _, t := range ticks {
			lo, hi = min(lo, t.Value), max(hi, t.Value)
		}
		p.X.Min, p.X.Max = lo/1.5, hi*1.5
		p.X.Label.Text += " (log scale)"
	case !numericAxes[pl.X]:
		p.NominalX(cats...)
		p.X.Min, p.X.Max = -0.5, float64(len(cats))-0.5
	}
	// Every metric is a count, a share, a time or a cost: the y axis starts
	// at zero, so a gap between lines is seen at its true size.
	if p.Y.Min > 0 {
		p.Y.Min = 0
	}
	p.Y.Tick.Marker = plainTicks{}
	// Room above the data for the legend, one row per line.
	p.Y.Max += (0.1 + 0.09*float64(len(lines))) * (p.Y.Max - p.Y.Min)
	return p, nil
}

// spread is a line's min-max range over the seeds, as plotter.YErrorBars
// wants it (offsets below and above the mean).
type spread struct{ l Line }

func (s spread) Len() int                { return len(s.l.X) }
func (s spread) XY(i int) (x, y float64) { return s.l.X[i], s.l.Y[i] }
func (s spread) YError(i int) (lo, hi float64) {
	return s.l.Y[i] - s.l.Lo[i], s.l.Hi[i] - s.l.Y[i]
}

// plainTicks are gonum's default ticks labelled in plain decimal with
// thousands separators ("250,000", not "2.5e+05").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = plainNumber(ticks[i].Value)
		}
	}
	return ticks
}

// plainNumber prints v without exponent, with thousands separators, and
// with as few decimals as tick values need.
func plainNumber(v float64) string {
	t := strconv.FormatFloat(v, 'f', -1, 64)
	if i := strings.IndexByte(t, '.'); i >= 0 && len(t)-i > 4 {
		t = strconv.FormatFloat(v, 'f', 3, 64)
		t = strings.TrimRight(strings.TrimRight(t, "0"), ".")
	}
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimPrefix(t, "-")
	intPart, frac, hasFrac := strings.Cut(t, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if hasFrac {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}
