package experiment

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/simbackend/dgjs"
)

// TestPaper004ResultsPage reruns paper 004's figure set (GRIDSUB_LONG=1:
// about 10 s on 2 cores) and checks that docs/results/paper004.md shows
// exactly the tables and verdicts the runs give. Run with -v to print them.
func TestPaper004ResultsPage(t *testing.T) {
	if os.Getenv("GRIDSUB_LONG") == "" {
		t.Skip("GRIDSUB_LONG=1 reruns paper 004's figures and checks docs/results/paper004.md")
	}
	page, err := os.ReadFile("../../docs/results/paper004.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, fig := range []struct{ file, level string }{{"paper004-low-failure.yaml", "low"}, {"paper004-high-failure.yaml", "high"}} {
		e, err := Load("../../configs/experiments/" + fig.file)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Execute(context.Background(), e, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range []string{resultsTable(s), claimsTable(s, paper004Claims[fig.level])} {
			t.Logf("%s:\n%s", fig.file, block)
			if !strings.Contains(string(page), block) {
				t.Errorf("docs/results/paper004.md does not show this block of %s verbatim:\n%s", fig.file, block)
			}
		}
	}
}

type claim struct {
	text     string
	metric   string // success_ratio or mean_completion
	a, b     string // "a is better than b"
	lowerWin bool
}

var paper004Claims = map[string][]claim{
	"low": {
		{"Refine worst: Min-min beats Refine (success)", "success_ratio", "min-min", "refine", false},
		{"Refine worst: DGJS beats Refine (success)", "success_ratio", "dgjs", "refine", false},
		{"Refine worst: Min-min beats Refine (completion)", "mean_completion", "min-min", "refine", true},
		{"Refine worst: DGJS beats Refine (completion)", "mean_completion", "dgjs", "refine", true},
		{"stable grid: Min-min beats DGJS (completion)", "mean_completion", "min-min", "dgjs", true},
		{"(conditional r) DGJS beats Refine (completion)", "mean_completion", "dgjs-conditional", "refine", true},
	},
	"high": {
		{"DGJS best: DGJS beats Min-min (success)", "success_ratio", "dgjs", "min-min", false},
		{"DGJS best: DGJS beats Refine (success)", "success_ratio", "dgjs", "refine", false},
		{"Min-min worst: Refine beats Min-min (success)", "success_ratio", "refine", "min-min", false},
		{"DGJS best: DGJS beats Min-min (completion)", "mean_completion", "dgjs", "min-min", true},
		{"DGJS best: DGJS beats Refine (completion)", "mean_completion", "dgjs", "refine", true},
		{"Min-min worst: Refine beats Min-min (completion)", "mean_completion", "refine", "min-min", true},
		{"(conditional r) DGJS beats Min-min (success)", "success_ratio", "dgjs-conditional", "min-min", false},
		{"(conditional r) DGJS beats Refine (success)", "success_ratio", "dgjs-conditional", "refine", false},
	},
}

// byPoint indexes a summary's runs by policy and jobs.
func byPoint(s *Summary) (map[string]map[int]Result, []int, []string) {
	m := map[string]map[int]Result{}
	var jobs []int
	var pols []string
	for _, r := range s.Runs {
		if m[r.Params.Policy] == nil {
			m[r.Params.Policy] = map[int]Result{}
			pols = append(pols, r.Params.Policy)
		}
		m[r.Params.Policy][r.Params.Jobs] = r
		if len(pols) == 1 {
			jobs = append(jobs, r.Params.Jobs)
		}
	}
	return m, jobs, pols
}

func resultsTable(s *Summary) string {
	m, jobs, pols := byPoint(s)
	var b strings.Builder
	b.WriteString("| jobs |")
	for _, p := range pols {
		fmt.Fprintf(&b, " %s success | %s completion (min) |", p, p)
	}
	b.WriteString("\n|---:|")
	for range pols {
		b.WriteString("---:|---:|")
	}
	b.WriteString("\n")
	for _, n := range jobs {
		fmt.Fprintf(&b, "| %d |", n)
		for _, p := range pols {
			r := m[p][n].Metrics
			fmt.Fprintf(&b, " %.3f ± %.3f | %.1f ± %.1f |", r["success_ratio"], r["success_sd"], r["mean_completion"], r["completion_sd"])
		}
		b.WriteString("\n")
	}
	return b.String()
}

func seedValues(r Result, metric string) []float64 {
	n := int(r.Metrics["seeds"])
	out := make([]float64, n)
	for k := range n {
		out[k] = r.Metrics[metric+"_s"+strconv.Itoa(k)]
	}
	return out
}

func claimsTable(s *Summary, cs []claim) string {
	m, jobs, _ := byPoint(s)
	var b strings.Builder
	b.WriteString("| claim |")
	for _, n := range jobs {
		fmt.Fprintf(&b, " %d |", n)
	}
	b.WriteString(" verdict |\n|---|")
	for range jobs {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "| %s |", c.text)
		var vs []string
		for _, n := range jobs {
			p := dgjs.Compare(seedValues(m[c.a][n], c.metric), seedValues(m[c.b][n], c.metric), c.lowerWin)
			vs = append(vs, p.Verdict())
			fmt.Fprintf(&b, " %d/%d/%d |", p.Wins, p.Ties, p.Losses)
		}
		fmt.Fprintf(&b, " %s |\n", dgjs.Summary(vs))
	}
	return b.String()
}
