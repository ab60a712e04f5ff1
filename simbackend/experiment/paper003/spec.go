package paper003

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gridsub/gridsub/policy/benefit"
	"github.com/gridsub/gridsub/simbackend/experiment"
)

// Kind is the experiment file's kind for paper 003.
const Kind = "paper003"

// ErrSpec: the experiment file is not valid.
var ErrSpec = errors.New("paper003 experiment")

// Spec is a paper 003 experiment file (configs/experiments/paper003-*.yaml).
type Spec struct {
	Name        string `yaml:"name" json:"name"`
	Title       string `yaml:"title" json:"title,omitempty"`
	Description string `yaml:"description" json:"description,omitempty"`
	Kind        string `yaml:"kind" json:"kind"`
	Grid        Grid   `yaml:"grid" json:"grid"`
	Tasks       Tasks  `yaml:"tasks" json:"tasks"`
	// Interval is Δt, the time between mapping events.
	Interval   Duration    `yaml:"interval" json:"interval"`
	Seeds      int         `yaml:"seeds" json:"seeds"`
	DataMB     []float64   `yaml:"data_mb" json:"data_mb"`
	Heuristics []Heuristic `yaml:"heuristics" json:"heuristics"`
	Plots      []Plot      `yaml:"plots" json:"plots"`
	Claims     []Claim     `yaml:"claims" json:"claims"`
}

// Grid is the simulated grid: clusters of hosts and data repositories.
type Grid struct {
	Clusters     []int      `yaml:"clusters" json:"clusters"`         // hosts per cluster
	Repositories int        `yaml:"repositories" json:"repositories"` // data repositories
	Speed        [2]float64 `yaml:"speed" json:"speed"`               // host speed, uniform in [lo, hi] (ETC = work / speed)
	// Bandwidth between each repository and each cluster, log-uniform in
	// [lo, hi] (e.g. ["2MB/s", "50MB/s"]).
	Bandwidth [2]string `yaml:"bandwidth" json:"bandwidth"`
	Replicas  [2]int    `yaml:"replicas" json:"replicas"` // repositories holding each task's input, uniform in [lo, hi]
	bw        [2]float64
}

// Tasks is the meta-task: arrivals, work, deadlines, benefit functions.
type Tasks struct {
	Count int `yaml:"count" json:"count"`
	// Work is the run time on a host of speed 1, uniform in [lo, hi].
	Work [2]Duration `yaml:"work" json:"work"`
	// Arrival is the mean time between arrivals (Poisson).
	Arrival Duration `yaml:"arrival" json:"arrival"`
	// Deadline is D − submit as a multiple of the task's run time on a host
	// of mean speed, uniform in [lo, hi]; it ignores the input transfer, so
	// larger inputs press the deadlines harder (the x axis of Fig. 5).
	Deadline [2]float64 `yaml:"deadline" json:"deadline"`
	// Benefit is the linear function's a, b, c (equation 1).
	Benefit [3]float64 `yaml:"benefit" json:"benefit"`
	// Urgent is the fraction of tasks with a step function instead: worth a
	// until UrgentB·D, nothing after.
	Urgent  float64 `yaml:"urgent" json:"urgent"`
	UrgentB float64 `yaml:"urgent_b" json:"urgent_b"`
}

// Heuristic is one compared mapping heuristic.
type Heuristic struct {
	Name  string `yaml:"name" json:"name"` // benefit, min-min, sufferage
	Blind bool   `yaml:"blind" json:"blind,omitempty"`
	// Machines (benefit only): a task may displace the holder of its
	// machine too (benefit.Config.ContestMachines, gridsub's variant); by
	// default only the data repository is contested, as the paper writes.
	Machines bool `yaml:"machines" json:"machines,omitempty"`
}

// Label names the heuristic in tables and plots ("min-min-blind",
// "benefit-machines").
func (h Heuristic) Label() string {
	l := h.Name
	if h.Machines {
		l += "-machines"
	}
	if h.Blind {
		l += "-blind"
	}
	return l
}

// Plot is one figure: a metric against the data size, one line per
// heuristic (mean over the seeds, with the standard error).
type Plot struct {
	Name       string   `yaml:"name" json:"name"`
	Title      string   `yaml:"title" json:"title,omitempty"`
	Y          string   `yaml:"y" json:"y"`
	Heuristics []string `yaml:"heuristics" json:"heuristics,omitempty"` // labels; default all
}

// Claim is a finding of the paper to check: metric(A) is less (or
// greater) than metric(B), at every data size ("each") or in its growth
// from the smallest to the largest size ("growth").
type Claim struct {
	Text   string `yaml:"text" json:"text"`
	Metric string `yaml:"metric" json:"metric"`
	A      string `yaml:"a" json:"a"`
	B      string `yaml:"b" json:"b"`
	Less   bool   `yaml:"less" json:"less"` // true: A < B; false: A > B
	Over   string `yaml:"over" json:"over"` // each (default) | growth
}

// Duration is a time.Duration written as "90s", "2m".
type Duration time.Duration

// UnmarshalYAML reads a Go duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like 90s or 2m", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// Metrics are what a run measures.
var Metrics = []string{"makespan", "abandoned", "late", "benefit", "mean_flow", "events", "remaps"}

// Bounds of an experiment file.
const (
	maxCells = 50_000_000 // hosts × tasks × (1 + copies) held by one mapping event
	maxRuns  = 100_000
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// IsKind reports whether the file at path is a paper 003 experiment (its
// top-level kind), without validating it.
func IsKind(path string) bool {
	b, err := readBounded(path)
	if err != nil {
		return false
	}
	var k struct {
		Kind string `yaml:"kind"`
	}
	return yaml.Unmarshal(b, &k) == nil && k.Kind == Kind
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrSpec, path)
	}
	const max = 1 << 20
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %s is %d bytes; at most %d", ErrSpec, path, fi.Size(), max)
	}
	b := make([]byte, fi.Size()+1)
	n, _ := f.Read(b)
	return b[:n], nil
}

// Load reads and validates an experiment file.
func Load(path string) (*Spec, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse reads an experiment: unknown fields are errors (with the line),
// and every value is checked.
func Parse(b []byte) (*Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Spec) validate() error {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if !nameRE.MatchString(s.Name) {
		bad("name: %q must be 1-64 letters, digits, '.', '_' or '-'", s.Name)
	}
	if s.Kind != Kind {
		bad("kind: %q, want %s", s.Kind, Kind)
	}
	g := &s.Grid
	if len(g.Clusters) == 0 || len(g.Clusters) > 64 {
		bad("grid.clusters: %d clusters; give 1 to 64 host counts", len(g.Clusters))
	}
	for i, n := range g.Clusters {
		if n < 1 || n > 1024 {
			bad("grid.clusters[%d]: %d hosts; 1 to 1024", i, n)
		}
	}
	if g.Repositories < 1 || g.Repositories > 64 {
		bad("grid.repositories: %d; 1 to 64", g.Repositories)
	}
	if !(g.Speed[0] > 0 && g.Speed[1] >= g.Speed[0] && g.Speed[1] <= 1000) {
		bad("grid.speed: %v; [lo, hi] with 0 < lo <= hi <= 1000", g.Speed)
	}
	for i, t := range g.Bandwidth {
		v, err := experiment.ParseBandwidth(t)
		if err != nil || v <= 0 {
			bad("grid.bandwidth[%d]: %q is not a bandwidth like 10MB/s", i, t)
		}
		g.bw[i] = v
	}
	if g.bw[0] > g.bw[1] {
		bad("grid.bandwidth: %v; [lo, hi] with lo <= hi", g.Bandwidth)
	}
	if g.Replicas[0] < 1 || g.Replicas[1] < g.Replicas[0] || g.Replicas[1] > g.Repositories {
		bad("grid.replicas: %v; [lo, hi] with 1 <= lo <= hi <= repositories (%d)", g.Replicas, g.Repositories)
	}
	t := &s.Tasks
	if t.Count < 1 || t.Count > 100000 {
		bad("tasks.count: %d; 1 to 100000", t.Count)
	}
	if !(t.Work[0] > 0 && t.Work[1] >= t.Work[0]) {
		bad("tasks.work: [lo, hi] with 0 < lo <= hi")
	}
	if t.Arrival < 0 {
		bad("tasks.arrival: must be >= 0 (0: every task at once)")
	}
	if !(t.Deadline[0] > 0 && t.Deadline[1] >= t.Deadline[0]) {
		bad("tasks.deadline: %v; [lo, hi] with 0 < lo <= hi", t.Deadline)
	}
	if !(t.Benefit[0] > 0 && t.Benefit[1] > 0 && t.Benefit[2] >= 0) {
		bad("tasks.benefit: %v; [a > 0, b > 0, c >= 0]", t.Benefit)
	}
	if t.Urgent < 0 || t.Urgent > 1 || t.Urgent > 0 && !(t.UrgentB > 0 && t.UrgentB <= 1) {
		bad("tasks.urgent: %g in [0, 1], with urgent_b in (0, 1] (got %g)", t.Urgent, t.UrgentB)
	}
	if s.Interval <= 0 {
		bad("interval: must be > 0 (Δt between mapping events)")
	}
	if s.Seeds < 1 || s.Seeds > 1000 {
		bad("seeds: %d; 1 to 1000 (results pages need >= 10)", s.Seeds)
	}
	if len(s.DataMB) == 0 {
		bad("data_mb: list the input data sizes (MB per task) to sweep")
	}
	for i, d := range s.DataMB {
		if d < 0 || d > 1e6 {
			bad("data_mb[%d]: %g; 0 to 1e6", i, d)
		}
	}
	var labels []string
	for i, h := range s.Heuristics {
		if !slices.Contains(benefit.Names(), h.Name) {
			bad("heuristics[%d].name: %q; valid are %s", i, h.Name, strings.Join(benefit.Names(), ", "))
		}
		if slices.Contains(labels, h.Label()) {
			bad("heuristics[%d]: %s listed twice", i, h.Label())
		}
		if h.Machines && h.Name != benefit.Benefit {
			bad("heuristics[%d].machines: only the benefit heuristic contests machines (%s never displaces)", i, h.Name)
		}
		labels = append(labels, h.Label())
	}
	if len(labels) == 0 {
		bad("heuristics: list at least one, e.g. {name: benefit}")
	}
	for i, p := range s.Plots {
		if !nameRE.MatchString(p.Name) {
			bad("plots[%d].name: %q", i, p.Name)
		}
		if !slices.Contains(Metrics, p.Y) {
			bad("plots[%d].y: %q; valid are %s", i, p.Y, strings.Join(Metrics, ", "))
		}
		for _, h := range p.Heuristics {
			if !slices.Contains(labels, h) {
				bad("plots[%d].heuristics: %q is not among the heuristics (%s)", i, h, strings.Join(labels, ", "))
			}
		}
	}
	for i, c := range s.Claims {
		if !slices.Contains(Metrics, c.Metric) {
			bad("claims[%d].metric: %q; valid are %s", i, c.Metric, strings.Join(Metrics, ", "))
		}
		for _, h := range []string{c.A, c.B} {
			if !slices.Contains(labels, h) {
				bad("claims[%d]: %q is not among the heuristics (%s)", i, h, strings.Join(labels, ", "))
			}
		}
		if c.Over != "" && c.Over != "each" && c.Over != "growth" {
			bad("claims[%d].over: %q; each or growth", i, c.Over)
		}
		if c.Over == "growth" && len(s.DataMB) < 2 {
			bad("claims[%d]: growth needs at least two data sizes", i)
		}
	}
	hosts := 0
	for _, n := range g.Clusters {
		hosts += max(n, 0)
	}
	// A mapping event holds ETC and TRAN per task, host and copy: bound
	// it, so a file cannot ask for more memory than a laptop has.
	if hosts > 0 && t.Count > 0 && hosts*t.Count*(1+max(g.Replicas[1], 1)) > maxCells {
		bad("grid and tasks: %d hosts × %d tasks × %d copies is more than %d cells per mapping event", hosts, t.Count, max(g.Replicas[1], 1), maxCells)
	}
	if len(s.DataMB)*len(s.Heuristics)*s.Seeds > maxRuns {
		bad("%d runs (data_mb × heuristics × seeds); at most %d", len(s.DataMB)*len(s.Heuristics)*s.Seeds, maxRuns)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrSpec, strings.Join(errs, "; "))
	}
	return nil
}
