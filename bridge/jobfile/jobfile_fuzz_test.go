package jobfile

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// Native fuzz targets of the job file parser and its units. The seeds are
// every example job file, every invalid example and the package's own
// testdata; scripts/fuzz.sh runs each target for a bounded time.

var sentinels = []error{ErrSyntax, ErrUnknownField, ErrType, ErrRequired, ErrValue, ErrConflict, ErrPath, ErrUnknownSite, ErrInput, ErrTime}

// watchdog panics when one input runs longer than hangAfter: the fuzzer has
// no per-input timeout, and a panic makes it save the input as a crasher.
// Call it as defer watchdog(input)().
func watchdog(input any) (stop func()) {
	t := time.AfterFunc(hangAfter, func() { panic(fmt.Sprintf("input still running after %s: %q", hangAfter, input)) })
	return func() { t.Stop() }
}

const hangAfter = 10 * time.Second

// addFiles adds the content of every file matching the globs as a seed.
func addFiles(f *testing.F, globs ...string) {
	f.Helper()
	n := 0
	for _, g := range globs {
		files, err := filepath.Glob(g)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			n++
		}
	}
	if n == 0 {
		f.Fatalf("no seed files match %v", globs)
	}
}

// FuzzJobFile feeds arbitrary bytes to Parse. A failure must be an ErrorList
// of *FieldError, each naming the file and wrapping exactly one sentinel; a
// success must satisfy every rule the schema states, and the job must come
// back unchanged when written out as YAML and parsed again.
func FuzzJobFile(f *testing.F) {
	addFiles(f, "../../examples/*.yaml", "../../examples/invalid/*.yaml", "testdata/*.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz.yaml"
		defer watchdog(data)()
		j, err := Parse(file, data)
		if err != nil {
			if j != nil {
				t.Fatalf("Parse returned a job and an error: %v", err)
			}
			checkErrorList(t, file, err)
			return
		}
		jobs := []*Job{j}
		if j.IsPipeline() { // a pipeline: each step is a job
			jobs = j.Steps
		}
		for _, j := range jobs {
			checkJob(t, j)
			checkResolve(t, j)
			again := roundTrip(t, j)
			if !sameJob(j, again) {
				t.Fatalf("job changed when written out and parsed again:\nfirst:  %+v\nsecond: %+v", *j, *again)
			}
		}
	})
}

func checkErrorList(t *testing.T, file string, err error) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error is %T, want a non-empty ErrorList: %v", err, err)
	}
	for i, fe := range list {
		if fe == nil {
			t.Fatalf("error %d is nil", i)
		}
		if fe.File != file || !strings.HasPrefix(fe.Error(), file+":") {
			t.Errorf("error %q does not name the file %s", fe.Error(), file)
		}
		if fe.Msg == "" {
			t.Errorf("error %d has no message: %+v", i, fe)
		}
		if fe.Pos.Line < 0 || fe.Pos.Column < 0 {
			t.Errorf("error %q has a negative position", fe.Error())
		}
		n := 0
		for _, s := range sentinels {
			if errors.Is(fe, s) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("error %q wraps %d sentinels, want exactly 1", fe.Error(), n)
		}
		if i > 0 {
			p, q := list[i-1].Pos, fe.Pos
			if q.Line < p.Line || q.Line == p.Line && q.Column < p.Column {
				t.Errorf("errors out of file order: %v before %v", p, q)
			}
		}
	}
}

// The rules of the schema, written out again here rather than taken from
// the parser, so that the fuzz targets check it against the documentation.
var (
	reserved = []string{"GRIDSUB_", "SLURM_", "PBS_"}
	wantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) // job and site names
	wantEnv  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// confined reports whether p is a relative path that stays in its directory.
func confined(p string) bool {
	if p == "" || strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.Contains(p, `\`) {
		return false
	}
	c := path.Clean(p)
	return c != ".." && !strings.HasPrefix(c, "../") && !path.IsAbs(c)
}

// checkJob holds a parsed job to the rules the schema states.
func checkJob(t *testing.T, j *Job) {
	t.Helper()
	if !wantName.MatchString(j.Name) {
		t.Errorf("name %q accepted", j.Name)
	}
	if (len(j.Command) > 0) == (j.Script != "") {
		t.Errorf("command %q and script %q: want exactly one", j.Command, j.Script)
	}
	if len(j.Command) > 0 && j.Command[0] == "" {
		t.Errorf("command %q names no program", j.Command)
	}
	if j.Script != "" && strings.TrimSpace(j.Script) == "" {
		t.Errorf("blank script accepted")
	}
	if len(j.Args) > 0 && len(j.Command) == 0 {
		t.Errorf("args %q with a script", j.Args)
	}
	for _, w := range j.Argv() {
		if strings.ContainsRune(w, 0) {
			t.Errorf("argv word %q holds a NUL", w)
		}
	}
	for k, v := range j.Env {
		if !wantEnv.MatchString(k) {
			t.Errorf("env name %q accepted", k)
		}
		for _, r := range reserved {
			if strings.HasPrefix(k, r) {
				t.Errorf("reserved env name %q accepted", k)
			}
		}
		if strings.ContainsRune(v, 0) {
			t.Errorf("env %s holds a NUL", k)
		}
	}
	if j.WorkDir != "" && !confined(j.WorkDir) {
		t.Errorf("workdir %q not confined", j.WorkDir)
	}
	remotes := map[string]bool{}
	for _, in := range j.Inputs {
		if in.Local == "" || strings.ContainsRune(in.Local, 0) {
			t.Errorf("input local %q accepted", in.Local)
		}
		if !confined(in.Remote) || strings.HasSuffix(in.Remote, "/") || path.Clean(in.Remote) == "." {
			t.Errorf("input remote %q not a confined file path", in.Remote)
		}
		if remotes[in.Remote] {
			t.Errorf("input remote %q given twice", in.Remote)
		}
		remotes[in.Remote] = true
		if in.Mode&^0o777 != 0 {
			t.Errorf("input mode %o beyond 0777", in.Mode)
		}
	}
	outs := map[string]bool{}
	for _, o := range j.Outputs {
		if !confined(o) || path.Clean(o) == "." {
			t.Errorf("output %q not confined", o)
		}
		if outs[o] {
			t.Errorf("output %q given twice", o)
		}
		outs[o] = true
	}
	r := j.Resources
	if r.Nodes < 1 || r.Nodes > 1<<20 || r.CoresPerNode < 0 || r.CoresPerNode > 1<<20 {
		t.Errorf("resources %+v out of range", r)
	}
	if r.Walltime <= 0 {
		t.Errorf("walltime %v accepted", r.Walltime)
	}
	if j.Simulate.Runtime < 0 || j.Simulate.ExitCode < 0 || j.Simulate.ExitCode > 255 {
		t.Errorf("simulate %+v out of range", j.Simulate)
	}
	s := j.Scheduling
	if s.DataSize < 0 || s.DataSize > 0 && s.Origin == "" {
		t.Errorf("data_size %d with origin %q", s.DataSize, s.Origin)
	}
	for _, name := range append(append([]string{s.Origin}, s.Sites...), s.Prefer...) {
		if name != "" && !wantName.MatchString(name) {
			t.Errorf("site name %q accepted", name)
		}
	}
	if !slices.Contains([]string{"auto", "high", "low", "none"}, string(s.QoS)) {
		t.Errorf("qos %q", s.QoS)
	}
	if s.Deadline.Relative && s.Deadline.Rel <= 0 {
		t.Errorf("relative deadline %v accepted", s.Deadline.Rel)
	}
	if b := s.Benefit; b != nil {
		if s.Deadline.IsZero() || !(b.A > 0) || !(b.B > 0) || !(b.C >= 0) || math.IsInf(b.A+b.B+b.C, 0) {
			t.Errorf("benefit %+v with deadline %v", *b, s.Deadline)
		}
	}
	if rv := s.Reservation; rv != nil {
		if rv.EarliestStart.IsZero() || rv.LatestEnd.IsZero() {
			t.Errorf("reservation %+v misses a bound", *rv)
		}
		if rv.EarliestStart.Relative && rv.EarliestStart.Rel < 0 || rv.LatestEnd.Relative && rv.LatestEnd.Rel < 0 {
			t.Errorf("reservation %+v has a negative relative time", *rv)
		}
		if rv.EarliestStart.Relative == rv.LatestEnd.Relative {
			w := rv.LatestEnd.Rel - rv.EarliestStart.Rel
			if !rv.LatestEnd.Relative {
				w = rv.LatestEnd.Abs.Sub(rv.EarliestStart.Abs)
			}
			if w < r.Walltime {
				t.Errorf("reservation window %v shorter than the walltime %v: %+v", w, r.Walltime, *rv)
			}
		}
	}
	spec := j.Spec("g-1")
	if err := spec.Validate(); err != nil {
		t.Errorf("a parsed job's spec is refused by the backends: %v", err)
	}
}

// checkResolve resolves a parsed job against a submission time: relative
// times must land after it and a relative reservation window must still
// hold the walltime, since Parse checked both.
func checkResolve(t *testing.T, j *Job) {
	t.Helper()
	submit := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	times, err := j.Resolve(submit)
	if err != nil {
		var list ErrorList
		if !errors.As(err, &list) || !errors.Is(err, ErrTime) {
			t.Fatalf("Resolve error %v is not an ErrorList of ErrTime", err)
		}
	}
	s := j.Scheduling
	if s.Deadline.Relative && !times.Deadline.After(submit) {
		t.Errorf("relative deadline %v resolves to %v, not after the submission", s.Deadline, times.Deadline)
	}
	if rv := s.Reservation; rv != nil && rv.EarliestStart.Relative && rv.LatestEnd.Relative {
		if err != nil {
			t.Errorf("a relative reservation window Parse accepted fails Resolve: %v", err)
		}
		if !(times.Flexibility >= 0 && times.Flexibility < 1) {
			t.Errorf("flexibility %v out of [0, 1)", times.Flexibility)
		}
	}
}

// yamlKeeps reports whether yaml.v3 itself round-trips s; strings it does
// not (a library limit, not the parser's) are skipped.
func yamlKeeps(s string) bool {
	b, err := yaml.Marshal(s)
	if err != nil {
		return false
	}
	var back string
	return yaml.Unmarshal(b, &back) == nil && back == s
}

func timeText(ts TimeSpec) string {
	if ts.Relative {
		return "+" + ts.Rel.String()
	}
	return ts.Abs.Format(time.RFC3339Nano)
}

// roundTrip writes j out as a job file and parses it again.
func roundTrip(t *testing.T, j *Job) *Job {
	t.Helper()
	var texts []string
	m := map[string]any{"name": j.Name}
	texts = append(texts, j.Name, j.Script, j.WorkDir)
	if len(j.Command) > 0 {
		m["command"] = j.Command
		texts = append(texts, j.Command...)
	} else {
		m["script"] = j.Script
	}
	if j.Args != nil {
		m["args"] = j.Args
		texts = append(texts, j.Args...)
	}
	if j.Env != nil {
		m["env"] = j.Env
		for k, v := range j.Env {
			texts = append(texts, k, v)
		}
	}
	if j.WorkDir != "" {
		m["workdir"] = j.WorkDir
	}
	if j.Setup != "" {
		m["setup"] = j.Setup
		texts = append(texts, j.Setup)
	}
	if j.SiteOptions != nil {
		so := map[string]any{}
		for k, o := range j.SiteOptions {
			e := map[string]string{}
			if o.Partition != "" {
				e["partition"] = o.Partition
			}
			if o.Account != "" {
				e["account"] = o.Account
			}
			so[k] = e
		}
		m["site_options"] = so
	}
	var ins []map[string]string
	for _, in := range j.Inputs {
		ins = append(ins, map[string]string{"local": in.Local, "remote": in.Remote, "mode": fmt.Sprintf("0%o", uint32(in.Mode))})
		texts = append(texts, in.Local, in.Remote)
	}
	for _, in := range j.SiteInputs {
		ins = append(ins, map[string]string{"site": in.Site, "path": in.Path, "size": strconv.FormatInt(in.Size, 10), "remote": in.Remote})
		texts = append(texts, in.Site, in.Path, in.Remote)
	}
	if ins != nil {
		m["inputs"] = ins
	}
	if j.Outputs != nil {
		m["outputs"] = j.Outputs
		texts = append(texts, j.Outputs...)
	}
	res := map[string]any{"nodes": j.Resources.Nodes, "walltime": j.Resources.Walltime.String()}
	if j.Resources.CoresPerNode != 0 {
		res["cores_per_node"] = j.Resources.CoresPerNode
	}
	if j.Resources.MemPerNode != 0 {
		res["memory_per_node"] = fmt.Sprintf("%dB", j.Resources.MemPerNode)
	}
	if j.Resources.GPUsPerNode != 0 {
		res["gpus_per_node"] = j.Resources.GPUsPerNode
	}
	m["resources"] = res
	s := j.Scheduling
	sch := map[string]any{"qos": string(s.QoS), "no_split": s.NoSplit}
	if s.Origin != "" {
		sch["origin"] = s.Origin
		sch["data_size"] = strconv.FormatInt(s.DataSize, 10)
	}
	if s.Sites != nil {
		sch["sites"] = s.Sites
	}
	if s.Prefer != nil {
		sch["prefer"] = s.Prefer
	}
	if !s.Deadline.IsZero() {
		sch["deadline"] = timeText(s.Deadline)
	}
	if b := s.Benefit; b != nil {
		sch["benefit"] = map[string]any{"shape": b.Shape, "a": b.A, "b": b.B, "c": b.C}
	}
	if s.DeadlinePolicy != "" {
		sch["deadline_policy"] = s.DeadlinePolicy
	}
	if rv := s.Reservation; rv != nil {
		sch["reservation"] = map[string]string{"earliest_start": timeText(rv.EarliestStart), "latest_end": timeText(rv.LatestEnd)}
	}
	m["scheduling"] = sch
	sim := map[string]any{"exit_code": j.Simulate.ExitCode}
	if j.Simulate.Runtime > 0 {
		sim["runtime"] = j.Simulate.Runtime.String()
	}
	m["simulate"] = sim
	if j.Array != "" {
		m["array"] = j.Array
	}
	if sw := j.Sweep; sw != nil {
		params := &yaml.Node{Kind: yaml.MappingNode}
		for _, p := range sw.Params {
			vals := &yaml.Node{Kind: yaml.SequenceNode}
			for _, v := range p.Values {
				vals.Content = append(vals.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v})
				texts = append(texts, v)
			}
			params.Content = append(params.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: p.Name}, vals)
		}
		sm := map[string]any{"params": params}
		if sw.Limit > 0 {
			sm["limit"] = sw.Limit
		}
		m["sweep"] = sm
	}
	for k, v := range map[string][]string{"after": j.After, "afterok": j.AfterOK, "afterany": j.AfterAny} {
		if v != nil {
			m[k] = v
			texts = append(texts, v...)
		}
	}
	for _, s := range texts {
		if !yamlKeeps(s) {
			t.Skipf("yaml.v3 does not round-trip %q", s)
		}
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatalf("yaml.Marshal: %v", err)
	}
	again, err := Parse("again.yaml", data)
	if err != nil {
		t.Fatalf("the parsed job written out again is refused: %v\n%s", err, data)
	}
	return again
}

// sameJob compares two jobs field by field, absolute times by instant and
// zone offset.
func sameJob(a, b *Job) bool {
	var offsets [2][]int
	norm := func(j *Job, offs *[]int) Job {
		c := *j
		c.file, c.pos = "", nil
		c.SiteInputs = slices.Clone(c.SiteInputs)
		for i := range c.SiteInputs {
			c.SiteInputs[i].field = "" // its index among all inputs: written out after the local ones
		}
		if len(c.Args) == 0 {
			c.Args = nil
		}
		c.Scheduling.Deadline = normTime(c.Scheduling.Deadline, offs)
		if r := c.Scheduling.Reservation; r != nil {
			c.Scheduling.Reservation = &Reservation{EarliestStart: normTime(r.EarliestStart, offs), LatestEnd: normTime(r.LatestEnd, offs)}
		}
		return c
	}
	na, nb := norm(a, &offsets[0]), norm(b, &offsets[1])
	return reflect.DeepEqual(na, nb) && reflect.DeepEqual(offsets[0], offsets[1])
}

func normTime(ts TimeSpec, offs *[]int) TimeSpec {
	if !ts.Relative && !ts.Abs.IsZero() {
		_, off := ts.Abs.Zone()
		*offs = append(*offs, off)
		ts.Abs = ts.Abs.UTC()
	}
	return ts
}

// FuzzDuration: ParseDuration never panics; what it accepts is negative only
// when written with a leading "-", and Duration.String gives it back exactly.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"90s", "20m", "1h30m", "1.5h", "2d", "1d12h", "01:30:00", "1-12:00:00", "-5m", "+5m", "100000d",
		"100000d2562047h", "99999-999999:59:59", "1e3h", "9223372036854775807ns", "-0s", " 3d ", "2d-1h", "1-", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if d != 0 || err.Error() == "" {
				t.Fatalf("ParseDuration(%q) = %v, %v: an error must give 0 and say why", s, d, err)
			}
			return
		}
		if d < 0 && !strings.HasPrefix(strings.TrimSpace(s), "-") {
			t.Fatalf("ParseDuration(%q) = %v: negative without a minus sign", s, d)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v, %v (String of %v from %q)", d.String(), back, err, d, s)
		}
	})
}

// FuzzSize: ParseSize gives a non-negative byte count or an error, and a
// count written as a plain number comes back exactly.
func FuzzSize(f *testing.F) {
	for _, s := range []string{"0", "512", "800B", "1KB", "50MB", "1.5GB", "2TB", "1KiB", "64MiB", "1 mb", "1_000", "-1MB", "1e30TB",
		"9223372036854775807", "9.2e18", "NaN", "+Inf", "0x10", "1.2.3", "--1", "8388607TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if n != 0 || err.Error() == "" {
				t.Fatalf("ParseSize(%q) = %v, %v", s, n, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, n)
		}
		if back, err := ParseSize(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("ParseSize(%d) = %d, %v (from %q)", n, back, err, s)
		}
	})
}

// FuzzTime: ParseTime gives a relative offset that is never negative, or an
// absolute time that RFC 3339 writes back to the same instant and offset.
func FuzzTime(f *testing.F) {
	for _, s := range []string{"+4h", "+90m", "+1d", "+01:00:00", "2026-12-01T12:00:00Z", "2026-12-01T20:00:00+08:00", "0001-01-01T00:00:00Z",
		"9999-12-31T23:59:59.999999999-23:59", "+-1h", "+ -1h", "++1h", "+0s", "2026-02-30T00:00:00Z", "+100000d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTime(s)
		if err != nil {
			if ts != (TimeSpec{}) {
				t.Fatalf("ParseTime(%q) = %+v with error %v", s, ts, err)
			}
			return
		}
		if ts.Relative {
			if ts.Rel < 0 || !ts.Abs.IsZero() {
				t.Fatalf("ParseTime(%q) = %+v: a relative time must be >= 0 and have no absolute part", s, ts)
			}
			return
		}
		back, err := ParseTime(ts.Abs.Format(time.RFC3339Nano))
		_, off1 := ts.Abs.Zone()
		_, off2 := back.Abs.Zone()
		if err != nil || !back.Abs.Equal(ts.Abs) || off1 != off2 || back.Relative {
			t.Fatalf("ParseTime(%q) = %+v, %v (written back from %q)", ts.Abs.Format(time.RFC3339Nano), back, err, s)
		}
	})
}
