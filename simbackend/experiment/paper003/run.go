package paper003

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Run is one simulation: a seed, a data size, a heuristic.
type Run struct {
	Seed      int     `json:"seed"`
	DataMB    float64 `json:"data_mb"`
	Heuristic string  `json:"heuristic"`
	Metrics   Result  `json:"metrics"`
}

// Point is the mean of a metric over the seeds at one data size for one
// heuristic, with its standard error.
type Point struct {
	DataMB    float64 `json:"data_mb"`
	Heuristic string  `json:"heuristic"`
	Metric    string  `json:"metric"`
	Mean      float64 `json:"mean"`
	SE        float64 `json:"se"`
	N         int     `json:"n"`
}

// Verdict is a claim checked at one data size (or over the growth).
type Verdict struct {
	Claim   string  `json:"claim"`
	At      string  `json:"at"`      // "data_mb=100" or "growth"
	MeanA   float64 `json:"mean_a"`  // metric (or growth) of A, mean over seeds
	MeanB   float64 `json:"mean_b"`  // of B
	Diff    float64 `json:"diff"`    // mean of the paired differences A − B
	CI95    float64 `json:"ci95"`    // half-width of its 95 % confidence interval (t distribution)
	InDir   int     `json:"in_dir"`  // seeds whose paired difference goes the claimed way
	Seeds   int     `json:"seeds"`   // paired seeds
	Verdict string  `json:"verdict"` // holds | within noise | does not hold
}

// Summary is everything a sim of this kind writes.
type Summary struct {
	Spec        *Spec     `json:"experiment"`
	File        string    `json:"file"`
	Runs        []Run     `json:"runs"`
	Points      []Point   `json:"points"`
	Verdicts    []Verdict `json:"verdicts"`
	Workers     int       `json:"workers"`
	WallSeconds float64   `json:"wall_seconds"`
}

// Execute runs every seed × data size × heuristic on workers goroutines
// (0: GOMAXPROCS). The results do not depend on the worker count.
func Execute(ctx context.Context, s *Spec, workers int) (*Summary, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	var runs []Run
	for seed := 1; seed <= s.Seeds; seed++ {
		for _, d := range s.DataMB {
			for _, h := range s.Heuristics {
				runs = append(runs, Run{Seed: seed, DataMB: d, Heuristic: h.Label()})
			}
		}
	}
	worlds := make([]*world, s.Seeds+1)
	var wmu sync.Mutex
	worldOf := func(seed int) *world {
		wmu.Lock()
		defer wmu.Unlock()
		if worlds[seed] == nil {
			worlds[seed] = newWorld(s, uint64(seed))
		}
		return worlds[seed]
	}
	heur := map[string]Heuristic{}
	for _, h := range s.Heuristics {
		heur[h.Label()] = h
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for k := 0; k < workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := &runs[i]
				r.Metrics = simulate(s, worldOf(r.Seed), heur[r.Heuristic], r.DataMB)
			}
		}()
	}
	var err error
feed:
	for i := range runs {
		select {
		case jobs <- i:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	sum := &Summary{Spec: s, Runs: runs, Workers: workers}
	sum.Points = points(s, runs)
	sum.Verdicts = verdicts(s, runs)
	sum.WallSeconds = time.Since(start).Seconds()
	return sum, nil
}

func points(s *Spec, runs []Run) []Point {
	var out []Point
	for _, m := range Metrics {
		for _, h := range s.Heuristics {
			for _, d := range s.DataMB {
				var xs []float64
				for _, r := range runs {
					if r.Heuristic == h.Label() && r.DataMB == d {
						xs = append(xs, r.Metrics[m])
					}
				}
				mean, sd := meanSD(xs)
				out = append(out, Point{DataMB: d, Heuristic: h.Label(), Metric: m, Mean: mean, SE: sd / math.Sqrt(float64(len(xs))), N: len(xs)})
			}
		}
	}
	return out
}

func meanSD(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	mean := s / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(v / float64(len(xs)-1))
}

// t975 is the 97.5 % quantile of Student's t with n−1 degrees of freedom
// (n paired seeds), for the 95 % confidence interval.
func t975(n int) float64 {
	table := []float64{0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086}
	df := n - 1
	switch {
	case df < 1:
		return math.Inf(1)
	case df < len(table):
		return table[df]
	case df < 40:
		return 2.03
	}
	return 1.96
}

// verdicts checks each claim seed by seed, by the project's one rule:
// "holds" when the paired difference goes the claimed way in every seed
// (at least 10); "does not hold" when it goes the other way in every seed;
// "within noise" otherwise, or with fewer than 10 seeds. The mean
// difference and its 95 % interval are reported beside it, not used.
func verdicts(s *Spec, runs []Run) []Verdict {
	val := func(h string, d float64, seed int, m string) float64 {
		for _, r := range runs {
			if r.Heuristic == h && r.DataMB == d && r.Seed == seed {
				return r.Metrics[m]
			}
		}
		return math.NaN()
	}
	var out []Verdict
	for _, c := range s.Claims {
		check := func(at string, fa, fb func(seed int) float64) {
			var diffs, as, bs []float64
			in := 0
			for seed := 1; seed <= s.Seeds; seed++ {
				a, b := fa(seed), fb(seed)
				diffs, as, bs = append(diffs, a-b), append(as, a), append(bs, b)
				if c.Less && a < b || !c.Less && a > b {
					in++
				}
			}
			mean, sd := meanSD(diffs)
			ma, _ := meanSD(as)
			mb, _ := meanSD(bs)
			ci := t975(len(diffs)) * sd / math.Sqrt(float64(len(diffs)))
			v := Verdict{Claim: c.Text, At: at, MeanA: ma, MeanB: mb, Diff: mean, CI95: ci, InDir: in, Seeds: len(diffs)}
			against := 0
			for k := range diffs {
				if c.Less && as[k] > bs[k] || !c.Less && as[k] < bs[k] {
					against++
				}
			}
			switch {
			case len(diffs) < 10:
				v.Verdict = "within noise"
			case in == len(diffs):
				v.Verdict = "holds"
			case against == len(diffs):
				v.Verdict = "does not hold"
			default:
				v.Verdict = "within noise"
			}
			out = append(out, v)
		}
		if c.Over == "growth" {
			d0, d1 := slices.Min(s.DataMB), slices.Max(s.DataMB)
			growth := func(h string) func(int) float64 {
				return func(seed int) float64 { return val(h, d1, seed, c.Metric) - val(h, d0, seed, c.Metric) }
			}
			check("growth", growth(c.A), growth(c.B))
			continue
		}
		for _, d := range s.DataMB {
			check("data_mb="+strconv.FormatFloat(d, 'g', -1, 64),
				func(seed int) float64 { return val(c.A, d, seed, c.Metric) },
				func(seed int) float64 { return val(c.B, d, seed, c.Metric) })
		}
	}
	return out
}

// WriteAll writes DIR/results.csv, DIR/compare.csv (every claim's verdict
// at every point, when the file has claims), DIR/summary.json and the
// plots, and returns the paths.
func WriteAll(dir string, s *Summary) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	p := filepath.Join(dir, "results.csv")
	f, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write(append([]string{"seed", "data_mb", "heuristic"}, Metrics...))
	for _, r := range s.Runs {
		row := []string{strconv.Itoa(r.Seed), strconv.FormatFloat(r.DataMB, 'g', -1, 64), r.Heuristic}
		for _, m := range Metrics {
			row = append(row, strconv.FormatFloat(r.Metrics[m], 'f', 3, 64))
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	files = append(files, p)
	if len(s.Verdicts) > 0 {
		p = filepath.Join(dir, "compare.csv")
		if err := writeVerdicts(p, s.Verdicts); err != nil {
			return files, err
		}
		files = append(files, p)
	}
	p = filepath.Join(dir, "summary.json")
	f, err = os.Create(p)
	if err != nil {
		return files, err
	}
	if err := WriteJSON(f, s); err != nil {
		f.Close()
		return files, err
	}
	if err := f.Close(); err != nil {
		return files, err
	}
	files = append(files, p)
	pl, err := writePlots(dir, s)
	return append(files, pl...), err
}

// WriteJSON writes the summary as indented JSON.
func WriteJSON(w io.Writer, s *Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteTable writes the means per data size and heuristic, and the
// verdicts, as text.
func WriteTable(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "%-10s %-16s %12s %10s %6s %12s\n", "data_mb", "heuristic", "makespan_s", "abandoned", "late", "benefit")
	get := func(d float64, h, m string) Point {
		for _, p := range s.Points {
			if p.DataMB == d && p.Heuristic == h && p.Metric == m {
				return p
			}
		}
		return Point{}
	}
	for _, d := range s.Spec.DataMB {
		for _, h := range s.Spec.Heuristics {
			l := h.Label()
			fmt.Fprintf(w, "%-10g %-16s %12.0f %10.1f %6.1f %12.0f\n", d, l, get(d, l, "makespan").Mean, get(d, l, "abandoned").Mean,
				get(d, l, "late").Mean, get(d, l, "benefit").Mean)
		}
	}
	if len(s.Verdicts) > 0 {
		fmt.Fprintln(w)
	}
	for _, v := range s.Verdicts {
		fmt.Fprintf(w, "%-14s %-16s A %.1f B %.1f diff %.1f ± %.1f (%d/%d seeds) — %s\n", v.Verdict, v.At, v.MeanA, v.MeanB, v.Diff, v.CI95, v.InDir, v.Seeds, v.Claim)
	}
}

// writeVerdicts writes the claims' verdicts as compare.csv: one row per
// claim and point, the means, the mean paired difference and its 95 %
// interval, the seeds going the claimed way, and the verdict. It holds no
// wall time, so the same file gives the same bytes.
func writeVerdicts(path string, vs []Verdict) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"claim", "at", "mean_a", "mean_b", "diff", "ci95", "in_dir", "seeds", "verdict"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, v := range vs {
		_ = cw.Write([]string{v.Claim, v.At, g(v.MeanA), g(v.MeanB), g(v.Diff), g(v.CI95), strconv.Itoa(v.InDir), strconv.Itoa(v.Seeds), v.Verdict})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
