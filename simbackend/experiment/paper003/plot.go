package paper003

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

var metricLabels = map[string]string{
	"makespan":  "makespan (s)",
	"abandoned": "abandoned tasks",
	"late":      "tasks ended after their deadline",
	"benefit":   "total benefit",
	"mean_flow": "mean flow time (s)",
	"events":    "mapping events",
	"remaps":    "times a mapped task was mapped again",
}

// writePlots draws each plot: the metric's mean over the seeds against
// the input data size, one line per heuristic, with standard-error bars.
func writePlots(dir string, s *Summary) ([]string, error) {
	var out []string
	for _, pl := range s.Spec.Plots {
		p := plot.New()
		p.Title.Text = pl.Title
		if p.Title.Text == "" {
			p.Title.Text = pl.Name
		}
		p.X.Label.Text = "input data per task (MB, mean)"
		p.Y.Label.Text = metricLabels[pl.Y]
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		hs := pl.Heuristics
		if len(hs) == 0 {
			for _, h := range s.Spec.Heuristics {
				hs = append(hs, h.Label())
			}
		}
		for i, h := range hs {
			var xys plotter.XYs
			var errs plotter.YErrors
			for _, pt := range s.Points {
				if pt.Heuristic == h && pt.Metric == pl.Y {
					xys = append(xys, plotter.XY{X: pt.DataMB, Y: pt.Mean})
					errs = append(errs, struct{ Low, High float64 }{pt.SE, pt.SE})
				}
			}
			ln, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return out, fmt.Errorf("plot %s: %w", pl.Name, err)
			}
			c := plotutil.Color(i)
			ln.Color, ln.Dashes = c, plotutil.Dashes(i)
			pts.Color, pts.Shape = c, plotutil.Shape(i)
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYer
				plotter.YErrorer
			}{xys, errs})
			if err != nil {
				return out, fmt.Errorf("plot %s: %w", pl.Name, err)
			}
			eb.Color = c
			p.Add(ln, pts, eb)
			p.Legend.Add(h, ln, pts)
		}
		p.Y.Min = 0
		p.Y.Max += (0.1 + 0.09*float64(len(hs))) * (p.Y.Max - p.Y.Min)
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
