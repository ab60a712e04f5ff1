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
		l := &lines[i]
		y := r.Metrics[pl.Y]
		if k := slices.Index(l.Labels, xs); k >= 0 { // another seed of the same point
			l.Y[k] += y // a sum until the end
			l.Lo[k], l.Hi[k] = min(l.Lo[k], y), max(l.Hi[k], y)
			l.N[k]++
			continue
		}
		l.X = append(l.X, x)
		l.Y = append(l.Y, y)
		l.Lo, l.Hi, l.N = append(l.Lo, y), append(l.Hi, y), append(l.N, 1)
		l.Labels = append(l.Labels, xs)
	}
	for i := range lines {
		for k, n := range lines[i].N {
			lines[i].Y[k] /= float64(n)
		}
	}
	return lines, categories
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
	p.Add(plotter.NewGrid())
	for i, l := range lines {
		xys := make(plotter.XYs, len(l.X))
		for k := range l.X {
			xys[k] = plotter.XY{X: l.X[k], Y: l.Y[k]}
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
		label := l.Label
		if label == "" {
			label = pl.Y
		}
		p.Legend.Add(label, ln, pts)
	}
	if !numericAxes[pl.X] {
		p.NominalX(cats...)
		p.X.Min, p.X.Max = -0.5, float64(len(cats))-0.5
	}
	// Paper 001 and 002's metrics are counts, shares and costs: from zero.
	if (s.Experiment.Kind == KindDRRM || s.Experiment.Kind == KindTrustMinMin) && p.Y.Min > 0 {
		p.Y.Min = 0
	}
	// Room above the data for the legend, one row per line.
	p.Y.Max += (0.1 + 0.09*float64(len(lines))) * (p.Y.Max - p.Y.Min)
	return p, nil
}
