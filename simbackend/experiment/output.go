package experiment

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Files written by WriteAll, besides the plots.
const (
	SummaryFile = "summary.json"
	ResultsFile = "results.csv"
)

// WriteAll writes summary.json, results.csv and every plot (PNG and SVG)
// into dir, creating it, and returns the paths written.
func WriteAll(dir string, s *Summary) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	write := func(name string, f func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := f(fh); err != nil {
			fh.Close()
			return fmt.Errorf("%s: %w", p, err)
		}
		if err := fh.Close(); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, p)
		return nil
	}
	if err := write(SummaryFile, func(w io.Writer) error { return WriteJSON(w, s) }); err != nil {
		return out, err
	}
	if err := write(ResultsFile, func(w io.Writer) error { return WriteCSV(w, s) }); err != nil {
		return out, err
	}
	if rows := Comparisons(s); len(rows) > 0 {
		if err := write(CompareFile, func(w io.Writer) error { return WriteCompareCSV(w, rows) }); err != nil {
			return out, err
		}
		if err := write(CompareMarkdownFile, func(w io.Writer) error {
			_, err := io.WriteString(w, CompareMarkdown(s.Experiment, rows))
			return err
		}); err != nil {
			return out, err
		}
	}
	plots, err := WritePlots(dir, s)
	return append(out, plots...), err
}

// WriteJSON writes the summary as indented JSON.
func WriteJSON(w io.Writer, s *Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteCSV writes one row per run: the parameters, then every metric. It
// holds no wall time, so the same experiment always gives the same bytes.
func WriteCSV(w io.Writer, s *Summary) error {
	cw := csv.NewWriter(w)
	head := append(append([]string{"run"}, s.Params...), s.Metrics...)
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range s.Runs {
		row := []string{strconv.Itoa(r.Index)}
		for _, p := range s.Params {
			row = append(row, r.Params.Value(p))
		}
		for _, m := range s.Metrics {
			v, ok := r.Metrics[m]
			if !ok {
				row = append(row, "")
				continue
			}
			row = append(row, FormatMetric(v))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// FormatMetric prints a metric the way results.csv does: the shortest
// decimal that reads back as the same float64.
func FormatMetric(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
