package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// Native fuzz targets of the experiment file. The seeds are every
// experiment under configs/experiments and the package's testdata (good and
// bad); scripts/fuzz.sh runs each target for a bounded time.

// watchdog panics when one input runs longer than hangAfter: the fuzzer has
// no per-input timeout, and a panic makes it save the input as a crasher.
// Call it as defer watchdog(input)().
func watchdog(input any) (stop func()) {
	t := time.AfterFunc(hangAfter, func() { panic(fmt.Sprintf("input still running after %s: %q", hangAfter, input)) })
	return func() { t.Stop() }
}

const hangAfter = 10 * time.Second

var experimentSentinels = []error{ErrSyntax, ErrUnknownKey, ErrType, ErrValue, ErrNoTrace}

// FuzzExperiment feeds arbitrary bytes to Parse. A failure must be an
// ErrorList of *FieldError in line order, each naming the file and wrapping
// exactly one sentinel. An accepted experiment must satisfy the documented
// ranges, expand to exactly the cartesian product of its sweep, and parse
// back to itself when written out as YAML (its defaults filled in: filling
// them is idempotent).
func FuzzExperiment(f *testing.F) {
	n := 0
	for _, g := range []string{"../../configs/experiments/*.yaml", "testdata/*.yaml", "testdata/bad/*.yaml"} {
		files, _ := filepath.Glob(g)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			n++
		}
	}
	if n < 10 {
		f.Fatalf("found %d seed experiments, want at least 10", n)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz.yaml"
		defer watchdog(data)()
		e, err := Parse(file, data)
		if err != nil {
			if e != nil {
				t.Fatalf("Parse returned an experiment and an error: %v", err)
			}
			checkExperimentErrors(t, file, err)
			return
		}
		checkExperiment(t, e)
		again := experimentRoundTrip(t, e)
		if a, b := canonical(t, e), canonical(t, again); a != b {
			t.Fatalf("experiment changed when written out and parsed again:\nfirst:  %s\nsecond: %s", a, b)
		}
	})
}

func checkExperimentErrors(t *testing.T, file string, err error) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error is %T, want a non-empty ErrorList: %v", err, err)
	}
	for i, fe := range list {
		if fe == nil {
			t.Fatalf("error %d is nil", i)
		}
		if fe.File != file || !strings.HasPrefix(fe.Error(), file) || fe.Msg == "" || fe.Pos.Line < 0 {
			t.Errorf("error %q does not name the file or says nothing", fe.Error())
		}
		k := 0
		for _, s := range experimentSentinels {
			if errors.Is(fe, s) {
				k++
			}
		}
		if k != 1 {
			t.Errorf("error %q wraps %d sentinels, want exactly 1", fe.Error(), k)
		}
	}
}

func checkExperiment(t *testing.T, e *Experiment) {
	t.Helper()
	if !nameRE.MatchString(e.Name) {
		t.Errorf("name %q accepted", e.Name)
	}
	runs := e.Expand()
	for i, r := range runs {
		if r.Index != i {
			t.Fatalf("run %d has index %d", i, r.Index)
		}
	}
	switch e.Kind {
	case KindCoalloc:
		w := e.Workload
		if strings.TrimSpace(w.Trace) == "" || w.Jobs < 0 || w.MaxProcs < 0 || w.WidthCap < 0 || w.Shape < 1 || w.Shape > 2 ||
			len(w.Wide) != 2 || w.Wide[0] < 1 || w.Wide[1] < w.Wide[0] || len(w.SizeMB) != 2 || !(w.ArrivalScale > 0) {
			t.Errorf("workload %+v accepted", w)
		}
		tb := e.Testbed
		if len(tb.Sites) == 0 || tb.P == nil || !validP(*tb.P) {
			t.Errorf("testbed %+v accepted", tb)
		}
		for _, s := range tb.Sites {
			if s.Nodes < 1 || s.H != nil && !(*s.H > 0 && *s.H <= 100) {
				t.Errorf("site %+v accepted", s)
			}
		}
		bw, err := ParseBandwidth(tb.Bandwidth)
		if err != nil || !(bw > 0) || math.IsInf(bw, 0) {
			t.Errorf("bandwidth %q = %v, %v", tb.Bandwidth, bw, err)
		}
		if lat, err := ParseLatency(tb.Latency); err != nil || lat < 0 {
			t.Errorf("latency %q = %v, %v", tb.Latency, lat, err)
		}
		if len(e.Policies) == 0 {
			t.Error("no policies accepted")
		}
		want := len(e.axisSeed()) * len(e.axisWorkload()) * len(e.axisHSet()) * len(e.axisBandwidth()) * len(e.Policies) * len(e.axisP())
		if len(runs) != want {
			t.Fatalf("Expand gave %d runs, want %d", len(runs), want)
		}
		for _, r := range runs {
			if _, err := e.siteH(r.Params.HSet); err != nil {
				t.Errorf("run %+v: %v", r, err)
			}
		}
	case KindCTCReference:
		if e.Reference.Procs < 1 || len(runs) != len(e.Reference.Modes) || !(e.Reference.MeanBSLD > 0) {
			t.Errorf("reference %+v, %d runs", e.Reference, len(runs))
		}
	case KindDGJS:
		d := e.DGJS
		if want := len(d.Jobs) * len(d.Failure) * len(d.Resources) * len(d.ArrivalPerMin) * len(e.Policies); len(runs) != want || want == 0 {
			t.Fatalf("Expand gave %d runs, want %d", len(runs), want)
		}
		if d.Seeds < 1 || d.MaxAttempts < 1 || !(d.Lambda > 0) {
			t.Errorf("dgjs %+v accepted", d)
		}
		for _, r := range runs {
			if _, err := e.failureModel(r.Params.Failure); err != nil || r.Params.Resources < 2 || r.Params.Jobs < 1 || !(r.Params.Arrival > 0) {
				t.Errorf("run %+v accepted (%v)", r.Params, err)
			}
		}
	case KindDRRM:
		d := e.DRRM
		if len(runs) == 0 || d.Seeds < 1 || len(d.Gap) == 0 || len(d.Flexibility) == 0 || (d.Set != SetSynthetic && d.Set != SetOSC) {
			t.Errorf("drrm %+v, %d runs accepted", d, len(runs))
		}
	case KindTrustMinMin:
		if len(runs) == 0 || e.Trust.config(e.Trust.Tasks[0], e.Trust.Migration[0], e.Policies[0], 1).Validate() != nil {
			t.Errorf("trust %+v, %d runs accepted", e.Trust, len(runs))
		}
	default:
		t.Errorf("kind %q accepted", e.Kind)
	}
}

// canonical is e as JSON: the json tags leave out empty lists and maps, so
// nil and empty compare equal, as they mean the same in a file.
func canonical(t *testing.T, e *Experiment) string {
	c := stripped(e)
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(b)
}

// stripped is e without what Parse records beside the file's content.
func stripped(e *Experiment) Experiment {
	c := *e
	c.file, c.lines = "", nil
	return c
}

// experimentRoundTrip writes e out, without the sections its kind refuses,
// and parses it again. A value yaml.v3 itself does not round-trip (a
// library limit, not the parser's) skips the input.
func experimentRoundTrip(t *testing.T, e *Experiment) *Experiment {
	t.Helper()
	c := stripped(e)
	data, err := yaml.Marshal(&c)
	if err != nil {
		t.Fatalf("yaml.Marshal: %v", err)
	}
	var plain Experiment
	if err := yaml.Unmarshal(data, &plain); err != nil || canonical(t, &plain) != canonical(t, &c) {
		t.Skipf("yaml.v3 does not round-trip this experiment (%v)", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	switch e.Kind {
	case KindCTCReference:
		for _, k := range []string{"workload", "testbed", "policies", "sweep"} {
			delete(m, k)
		}
	case KindDRRM, KindTrustMinMin:
		for _, k := range []string{"workload", "testbed", "sweep", "reference"} {
			delete(m, k)
		}
		if d, ok := m["drrm"].(map[string]any); ok { // the other set's keys, left empty
			for k, v := range d {
				if l, ok := v.([]any); ok && len(l) == 0 {
					delete(d, k)
				}
			}
		}
	default:
		delete(m, "reference")
	}
	if e.Kind == KindDGJS {
		for _, k := range []string{"workload", "testbed", "sweep"} {
			delete(m, k)
		}
	} else {
		delete(m, "dgjs")
	}
	if data, err = yaml.Marshal(m); err != nil {
		t.Fatal(err)
	}
	again, err := Parse("again.yaml", data)
	if err != nil {
		t.Fatalf("the accepted experiment written out again is refused: %v\n%s", err, data)
	}
	if e.Kind == KindCTCReference {
		// The sections left out get their defaults again.
		again.Workload, again.Testbed, again.Policies, again.Sweep = e.Workload, e.Testbed, e.Policies, e.Sweep
	}
	if e.Kind == KindDGJS || e.Kind == KindDRRM || e.Kind == KindTrustMinMin {
		again.Workload, again.Testbed, again.Sweep, again.Reference = e.Workload, e.Testbed, e.Sweep, e.Reference
	}
	return again
}

// FuzzUnits: ParseBandwidth gives a finite rate > 0 and ParseLatency a
// duration in [0, 1h], or an error quoting the input.
func FuzzUnits(f *testing.F) {
	for _, s := range []string{"1MB/s", "100KB/s", "50KBps", "10Mbps", "10Kbps", "1bps", "575ms", "1h", "1h1ns", "-1ms", "0",
		"1e15GB/s", "NaNMB/s", "+InfKBps", "0x10MB/s", " 5 kB/s ", "1e-320B/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if bw, err := ParseBandwidth(s); err != nil {
			if bw != 0 || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Errorf("ParseBandwidth(%q) = %v, %v", s, bw, err)
			}
		} else if !(bw > 0) || math.IsInf(bw, 0) || bw > 1e15*1e9 {
			t.Errorf("ParseBandwidth(%q) = %v", s, bw)
		}
		if d, err := ParseLatency(s); err != nil {
			if d != 0 || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Errorf("ParseLatency(%q) = %v, %v", s, d, err)
			}
		} else if d < 0 || d > time.Hour {
			t.Errorf("ParseLatency(%q) = %v", s, d)
		}
	})
}
