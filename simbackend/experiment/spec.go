package experiment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gridsub/gridsub/bridge/jobfile"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gridsub/gridsub/backends/regularfile"
)

// Kinds of experiment.
const (
	// KindCoalloc replays a shaped trace through the broker and a
	// co-allocation planner on the simulated multi-site testbed (the
	// default).
	KindCoalloc = "coalloc"
	// KindCTCReference replays CTC-SP2 on one 338-processor site under
	// simbackend's EASY scheduler and compares the schedule with the pyss
	// reference (workloads/README.md).
	KindCTCReference = "ctc-easy-reference"
)

// Experiment is one experiment file.
type Experiment struct {
	Name        string    `yaml:"name" json:"name,omitempty"`
	Title       string    `yaml:"title" json:"title,omitempty"`
	Description string    `yaml:"description" json:"description,omitempty"`
	Kind        string    `yaml:"kind" json:"kind,omitempty"`
	Workload    Workload  `yaml:"workload" json:"workload,omitempty"`
	Testbed     Testbed   `yaml:"testbed" json:"testbed,omitempty"`
	Policies    []string  `yaml:"policies" json:"policies,omitempty"`
	Sweep       Sweep     `yaml:"sweep" json:"sweep,omitempty"`
	Reference   Reference `yaml:"reference" json:"reference,omitempty"`
	DGJS        DGJSSpec  `yaml:"dgjs,omitempty" json:"dgjs,omitempty"`   // kind dgjs (dgjs.go)
	DRRM        DRRMSpec  `yaml:"drrm,omitempty" json:"drrm,omitempty"`   // kind drrm (paper001.go)
	Trust       TrustSpec `yaml:"trust,omitempty" json:"trust,omitempty"` // kind trust-minmin (paper002.go)
	Plots       []Plot    `yaml:"plots" json:"plots,omitempty"`
	Compare     []Compare `yaml:"compare" json:"compare,omitempty"` // kind coalloc: seed-by-seed verdicts (compare.go)

	file  string
	lines map[string]int // field path -> line
}

// Workload says which jobs to replay: a PWA trace, filtered, cut to its
// first Jobs jobs and shaped into paper 000's Workload 1 or 2.
type Workload struct {
	// Trace is a file name in swf.WorkloadsDir() ($GRIDSUB_WORKLOADS or
	// ../shared/workloads), or a path.
	Trace string `yaml:"trace" json:"trace,omitempty"`
	// Filter: "strong" (predictsim's filter, the default) or "none".
	Filter string `yaml:"filter" json:"filter,omitempty"`
	// MaxProcs bounds the strong filter (default: the trace header's
	// MaxProcs, 338 for CTC).
	MaxProcs int64 `yaml:"max_procs" json:"max_procs,omitempty"`
	// Jobs keeps the first Jobs jobs after filtering (0 = all).
	Jobs int `yaml:"jobs" json:"jobs,omitempty"`
	// WidthCap caps every width (32 in the paper; 0 = no cap).
	WidthCap int64 `yaml:"width_cap" json:"width_cap,omitempty"`
	// Shape is the paper's Workload 1 (the trace) or 2 (90 % of the jobs
	// redrawn wide); a sweep over "workload" overrides it. Default 1.
	Shape int `yaml:"shape" json:"shape,omitempty"`
	// Wide is [min, max] of Workload 2's redrawn widths (default [11, 32]).
	Wide []int64 `yaml:"wide" json:"wide,omitempty"`
	// SizeMB is [min, max] of the uniform data size in MB (default [1, 100]).
	SizeMB []float64 `yaml:"size_mb" json:"size_mb,omitempty"`
	// Seed drives every random draw of the shaping (submit sites, sizes,
	// Workload 2's widths).
	Seed uint64 `yaml:"seed" json:"seed,omitempty"`
	// ArrivalScale multiplies every submit time (default 1, the trace's own
	// arrivals; below 1 raises the load).
	ArrivalScale float64 `yaml:"arrival_scale" json:"arrival_scale,omitempty"`
}

// SiteSpec is one simulated site.
type SiteSpec struct {
	Name  string   `yaml:"name" json:"name,omitempty"`
	Nodes int      `yaml:"nodes" json:"nodes,omitempty"`
	H     *float64 `yaml:"h" json:"h,omitempty"` // heterogeneity factor, default 1
	// Area is the site's local area, read by the trust-min-min policy
	// (paper 002); "" = an area of its own.
	Area string `yaml:"area" json:"area,omitempty"`
}

// Testbed is the simulated grid.
type Testbed struct {
	// Sites default to paper 000's Beijing 128, Shanghai 64, Harbin 32.
	Sites []SiteSpec `yaml:"sites" json:"sites,omitempty"`
	// HSet names the h values applied to the sites in order: "small"
	// (1, 1, 1), "large" (1.4, 1.0, 0.6) or a key of HSets. Empty keeps
	// the sites' own h. A sweep over "h_set" overrides it.
	HSet  string               `yaml:"h_set" json:"h_set,omitempty"`
	HSets map[string][]float64 `yaml:"h_sets" json:"h_sets,omitempty"`
	// Bandwidth between any two sites, e.g. "100KB/s", "1MB/s", "10Kbps"
	// (default 1MB/s). Latency between any two sites (default 575ms).
	Bandwidth string `yaml:"bandwidth" json:"bandwidth,omitempty"`
	Latency   string `yaml:"latency" json:"latency,omitempty"`
	// P is the multi-site factor (default 1.0).
	P *float64 `yaml:"p" json:"p,omitempty"`
	// LearnTrust names a trust policy (policy/registry, e.g. paper002)
	// that learns the sites' trust during each replay from the jobs'
	// outcomes, as the live daemon does (replay.Setup.Trust), aged by
	// TrustHalfLife of virtual time ("" or "0s": never). Empty: trust
	// stays unset (1), as in the papers' runs.
	LearnTrust    string `yaml:"learn_trust" json:"learn_trust,omitempty"`
	TrustHalfLife string `yaml:"trust_half_life" json:"trust_half_life,omitempty"`
}

// Sweep lists the values of each swept parameter; the runs are the
// cartesian product of these and Experiment.Policies. An empty list keeps
// the testbed's or workload's single value.
type Sweep struct {
	P         []float64 `yaml:"p" json:"p,omitempty"`
	HSet      []string  `yaml:"h_set" json:"h_set,omitempty"`
	Bandwidth []string  `yaml:"bandwidth" json:"bandwidth,omitempty"`
	Workload  []int     `yaml:"workload" json:"workload,omitempty"`
	// Seed repeats every run once per seed (each replaces workload.seed:
	// submit sites, sizes, Workload 2's widths and the replay's tie-breaks).
	// Plots draw the mean over the seeds with a bar from the lowest to the
	// highest; compare (compare.go) counts the seeds a direction holds on.
	Seed []uint64 `yaml:"seed" json:"seed,omitempty"`
}

// Reference configures the kind ctc-easy-reference.
type Reference struct {
	// Trace (default CTC-SP2-1996-3.1-cln.swf.gz) and Schedule, the
	// reference output (default reference/CTC-SP2.pyss-easy-backfill.swf.gz),
	// both looked up like Workload.Trace.
	Trace    string `yaml:"trace" json:"trace,omitempty"`
	Schedule string `yaml:"schedule" json:"schedule,omitempty"`
	// Procs is the site's size (default 338).
	Procs int `yaml:"procs" json:"procs,omitempty"`
	// Modes of simbackend's EASY core to run: "reference-compatible"
	// and/or "default" (default: both).
	Modes []string `yaml:"modes" json:"modes,omitempty"`
	// MeanBSLD is the reference schedule's mean bounded slowdown (default
	// 49.5713).
	MeanBSLD float64 `yaml:"mean_bsld" json:"mean_bsld,omitempty"`
}

// Plot is one figure: Y against X, one line per combination of Series,
// over the runs matching Where.
type Plot struct {
	Name   string            `yaml:"name" json:"name,omitempty"` // file stem of DIR/NAME.png and .svg
	Title  string            `yaml:"title" json:"title,omitempty"`
	X      string            `yaml:"x" json:"x,omitempty"`
	Y      string            `yaml:"y" json:"y,omitempty"`
	Series []string          `yaml:"series" json:"series,omitempty"`
	Where  map[string]string `yaml:"where" json:"where,omitempty"`
}

// Named h sets of paper 000.
var namedHSets = map[string][]float64{
	"small": {1.0, 1.0, 1.0},
	"large": {1.4, 1.0, 0.6},
}

// DefaultSites is paper 000's testbed.
func DefaultSites() []SiteSpec {
	return []SiteSpec{{Name: "Beijing", Nodes: 128}, {Name: "Shanghai", Nodes: 64}, {Name: "Harbin", Nodes: 32}}
}

// MaxFileSize is the largest experiment file Parse accepts.
const MaxFileSize = 1 << 20

// Load reads and parses an experiment file: a regular file (not a FIFO or
// a device) of at most MaxFileSize bytes.
func Load(file string) (*Experiment, error) {
	data, err := regularfile.Read(file, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("reading experiment file: %w", err)
	}
	return Parse(file, data)
}

// File is the name the experiment was parsed under.
func (e *Experiment) File() string { return e.file }

var yamlLineRE = regexp.MustCompile(`line (\d+): (.*)`)

// Parse parses and validates an experiment file; filename appears in
// errors only. The error is an ErrorList naming each problem's line.
func Parse(filename string, data []byte) (*Experiment, error) {
	p := &parser{file: filename, lines: map[string]int{}}
	if len(data) > MaxFileSize {
		p.add(0, "", ErrSyntax, "file is %d bytes; an experiment file may be at most %d", len(data), MaxFileSize)
		return nil, p.errs
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(1, "", ErrValue, "empty experiment file (see configs/experiments/ for examples)")
		} else {
			p.yamlErr(err, ErrSyntax)
		}
		return nil, p.errs
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.add(extra.Line, "", ErrSyntax, "an experiment file holds one YAML document; found a second one")
		return nil, p.errs
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		p.add(root.Line, "", ErrType, "an experiment file is a mapping (name:, workload:, testbed:, policies:, sweep:, plots:)")
		return nil, p.errs
	}
	e := &Experiment{}
	p.walk(root, reflect.TypeOf(*e), "")
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	if err := root.Decode(e); err != nil {
		p.yamlErr(err, ErrType)
		return nil, p.errs
	}
	e.file, e.lines = filename, p.lines
	e.defaults()
	p.validate(e)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *FieldError) int { return a.Pos.Line - b.Pos.Line })
		return nil, p.errs
	}
	return e, nil
}

type parser struct {
	file  string
	lines map[string]int
	errs  ErrorList
}

func (p *parser) add(line int, field string, sentinel error, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{File: p.file, Pos: jobfile.Pos{Line: line}, Field: field, Msg: fmt.Sprintf(format, args...), Err: sentinel})
}

// at adds an error located at the line of field (or of its nearest parent
// the file spells out).
func (p *parser) at(field string, sentinel error, format string, args ...any) {
	line := 0
	for f := field; f != ""; {
		if l, ok := p.lines[f]; ok {
			line = l
			break
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	p.add(line, field, sentinel, format, args...)
}

// yamlErr turns yaml.v3's errors (one per line "line N: msg") into FieldErrors.
func (p *parser) yamlErr(err error, sentinel error) {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for _, m := range msgs {
		line := 1
		if s := yamlLineRE.FindStringSubmatch(m); s != nil {
			line, _ = strconv.Atoi(s[1])
			m = s[2]
		}
		m = strings.TrimPrefix(m, "yaml: ")
		m = strings.ReplaceAll(m, "!!", "")
		if strings.HasPrefix(m, "did not find expected") {
			// yaml.v3's parser errors count lines from 0 and point at the
			// start of the enclosing block.
			line++
			m += " (check the indentation of the block starting here and the lines after it)"
		}
		p.add(line, "", sentinel, "%s", m)
	}
}

// walk checks every mapping key of n against the yaml tags of t, records
// the line of every field path, and reports unknown keys with the valid
// ones.
func (p *parser) walk(n *yaml.Node, t reflect.Type, path string) {
	if path != "" {
		p.lines[path] = n.Line
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
				return
			}
			p.add(n.Line, path, ErrType, "want a mapping with keys %s", strings.Join(tagsOf(t), ", "))
			return
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			if tag := strings.Split(f.Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
				fields[tag] = f.Type
			}
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub := join(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				hint := ""
				if path == "sweep" && k.Value == "policy" {
					hint = "; the policies to compare are the top-level list `policies`"
				}
				p.add(k.Line, sub, ErrUnknownKey, "unknown key %q in %s; valid keys are %s%s", k.Value, orTop(path), strings.Join(tagsOf(t), ", "), hint)
				continue
			}
			if seen[k.Value] {
				p.add(k.Line, sub, ErrSyntax, "key %q given twice", k.Value)
				continue
			}
			seen[k.Value] = true
			p.walk(v, ft, sub)
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				p.walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				p.walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
			}
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "the experiment"
	}
	return path
}

func tagsOf(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

// defaults fills in what the file leaves out.
func (e *Experiment) defaults() {
	if e.Kind == "" {
		e.Kind = KindCoalloc
	}
	w := &e.Workload
	if w.Filter == "" {
		w.Filter = "strong"
	}
	if w.Shape == 0 {
		w.Shape = 1
	}
	if w.Wide == nil {
		w.Wide = []int64{11, 32}
	}
	if w.SizeMB == nil {
		w.SizeMB = []float64{1, 100}
	}
	if w.ArrivalScale == 0 {
		w.ArrivalScale = 1
	}
	t := &e.Testbed
	if t.Sites == nil {
		t.Sites = DefaultSites()
	}
	if t.Bandwidth == "" {
		t.Bandwidth = "1MB/s"
	}
	if t.Latency == "" {
		t.Latency = "575ms"
	}
	if t.P == nil {
		one := 1.0
		t.P = &one
	}
	e.dgjsDefaults()
	r := &e.Reference
	if r.Trace == "" {
		r.Trace = "CTC-SP2-1996-3.1-cln.swf.gz"
	}
	if r.Schedule == "" {
		r.Schedule = "reference/CTC-SP2.pyss-easy-backfill.swf.gz"
	}
	if r.Procs == 0 {
		r.Procs = 338
	}
	if r.Modes == nil {
		r.Modes = []string{ModeReference, ModeDefault}
	}
	if r.MeanBSLD == 0 {
		r.MeanBSLD = 49.5713
	}
	if e.Kind == KindDRRM {
		e.drrmDefaults()
	}
	if e.Kind == KindTrustMinMin {
		e.trustDefaults()
	}
}

// Modes of the reference experiment.
const (
	ModeReference = "reference-compatible"
	ModeDefault   = "default"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// hSet returns the h values of a named set.
func (e *Experiment) hSet(name string) ([]float64, bool) {
	if h, ok := e.Testbed.HSets[name]; ok {
		return h, true
	}
	h, ok := namedHSets[name]
	return h, ok
}

func (e *Experiment) hSetNames() []string {
	names := []string{"small", "large"}
	for k := range e.Testbed.HSets {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names[2:])
	return names
}

// MarshalJSON writes the experiment as summary.json shows it: only the
// sections its kind uses, with the defaults filled in.
func (e *Experiment) MarshalJSON() ([]byte, error) {
	type view struct {
		Name        string     `json:"name"`
		Title       string     `json:"title,omitempty"`
		Description string     `json:"description,omitempty"`
		Kind        string     `json:"kind"`
		File        string     `json:"file,omitempty"`
		Workload    *Workload  `json:"workload,omitempty"`
		Testbed     *Testbed   `json:"testbed,omitempty"`
		Policies    []string   `json:"policies,omitempty"`
		Sweep       *Sweep     `json:"sweep,omitempty"`
		Reference   *Reference `json:"reference,omitempty"`
		DGJS        *DGJSSpec  `json:"dgjs,omitempty"`
		DRRM        *DRRMSpec  `json:"drrm,omitempty"`
		Trust       *TrustSpec `json:"trust,omitempty"`
		Plots       []Plot     `json:"plots,omitempty"`
		Compare     []Compare  `json:"compare,omitempty"`
	}
	v := view{Name: e.Name, Title: e.Title, Description: e.Description, Kind: e.Kind, File: e.file, Plots: e.Plots, Compare: e.Compare}
	switch e.Kind {
	case KindCTCReference:
		v.Reference = &e.Reference
	case KindDGJS:
		v.DGJS, v.Policies = &e.DGJS, e.Policies
	case KindDRRM:
		v.DRRM, v.Policies = &e.DRRM, e.Policies
	case KindTrustMinMin:
		v.Trust, v.Policies = &e.Trust, e.Policies
	default:
		v.Workload, v.Testbed, v.Policies, v.Sweep = &e.Workload, &e.Testbed, e.Policies, &e.Sweep
	}
	return json.Marshal(v)
}
