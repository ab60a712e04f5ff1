package experiment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/simbackend/swf"
)

// TestHostileFiles: Load refuses a FIFO (without blocking), /dev/zero, a
// directory and a file over MaxFileSize; TracePath refuses a trace that is
// not a regular file.
func TestHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, says string }{
		{fifo, "is a named pipe (FIFO), not a regular file"},
		{"/dev/zero", "is a character device, not a regular file"},
		{dir, "is a directory, not a regular file"},
		{big, "is 1048577 bytes; at most 1048576 are read"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(tc.path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Load(%s) = %v; want an error saying %q", tc.path, err, tc.says)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) still reading after 5s", tc.path)
		}
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		if _, err := TracePath(p); !errors.Is(err, ErrNoTrace) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("TracePath(%s) = %v; want ErrNoTrace, not a regular file", p, err)
		}
		if _, err := openFile(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("openFile(%s) = %v", p, err)
		}
	}
}

// TestHostileValues: each numeric field out of range, NaN or infinite, or
// at a size that would overflow simulated time, is refused naming the
// field.
// seq is a YAML flow list of n values formatted with format: from, from+step, ...
func seq(n int, format string, from, step float64) string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf(format, from+float64(i)*step)
	}
	return "[" + strings.Join(vs, ", ") + "]"
}

func TestHostileValues(t *testing.T) {
	const head = "name: h\n"
	wl := func(kv string) string {
		return head + "workload: {trace: X.swf, " + kv + "}\npolicies: [greedy-easy]\n"
	}
	tb := func(kv string) string {
		return head + "workload: {trace: X.swf}\npolicies: [greedy-easy]\ntestbed: {" + kv + "}\n"
	}
	ref := func(kv string) string { return head + "kind: ctc-easy-reference\nreference: {" + kv + "}\n" }
	for _, tc := range []struct{ name, src, field, says string }{
		{"max_procs huge", wl("max_procs: 9223372036854775807"), "workload.max_procs", "to 16777216"},
		{"max_procs negative", wl("max_procs: -1"), "workload.max_procs", "from 0"},
		{"jobs huge", wl("jobs: 1099511627776"), "workload.jobs", "to 16777216"},
		{"width_cap huge", wl("width_cap: 1099511627776"), "workload.width_cap", "to 1048576"},
		{"wide huge", wl("wide: [1, 9223372036854775807]"), "workload.wide", "max <= 1048576"},
		{"size NaN", wl("size_mb: [.nan, 10]"), "workload.size_mb", "0 <= min <= max"},
		{"size Inf", wl("size_mb: [1, .inf]"), "workload.size_mb", "0 < max <= 1e6"},
		{"size NaN max", wl("size_mb: [1, .nan]"), "workload.size_mb", "0 < max <= 1e6"},
		{"arrival NaN", wl("arrival_scale: .nan"), "workload.arrival_scale", "(0, 1000]"},
		{"arrival tiny negative", wl("arrival_scale: -1e-300"), "workload.arrival_scale", "(0, 1000]"},
		{"nodes 2^40", tb("sites: [{name: A, nodes: 1099511627776}]"), "testbed.sites[0].nodes", "from 1 to 1048576"},
		{"h tiny", tb("sites: [{name: A, nodes: 4, h: 1e-300}]"), "testbed.sites[0].h", "in [0.01, 100]"},
		{"h NaN", tb("sites: [{name: A, nodes: 4, h: .nan}]"), "testbed.sites[0].h", "in [0.01, 100]"},
		{"h set tiny", tb("sites: [{name: A, nodes: 4}], h_sets: {x: [1e-300]}"), "testbed.h_sets.x", "in [0.01, 100]"},
		{"bandwidth a trickle", tb("bandwidth: 0.000001Kbps"), "testbed.bandwidth", "from 1KB/s"},
		{"bandwidth 1 B/s", tb("bandwidth: 1B/s"), "testbed.bandwidth", "from 1KB/s"},
		{"bandwidth NaN", tb("bandwidth: NaNMB/s"), "testbed.bandwidth", "positive number"},
		{"latency 1000h", tb("latency: 1000h"), "testbed.latency", "between 0 and 1h"},
		{"latency overflow", tb("latency: 9999999999h"), "testbed.latency", "between 0 and 1h"},
		{"p Inf", tb("p: .inf"), "testbed.p", "[1, 10]"},
		{"sweep bandwidth trickle", head + "workload: {trace: X.swf}\npolicies: [greedy-easy]\nsweep: {bandwidth: [1MB/s, 10bps]}\n", "sweep.bandwidth[1]", "from 1KB/s"},
		{"sweep p NaN", head + "workload: {trace: X.swf}\npolicies: [greedy-easy]\nsweep: {p: [.nan]}\n", "sweep.p[0]", "[1, 10]"},
		// Long lists: the duplicate checks are quadratic and the runs are
		// their product; both are bounded before either is computed.
		{"sweep p 300 values", head + "workload: {trace: X.swf}\npolicies: [greedy-easy]\nsweep: {p: " + seq(300, "%.4f", 1, 0.001) + "}\n", "sweep.p", "at most 256"},
		{"sweep product over MaxRuns", head + "workload: {trace: X.swf}\npolicies: [greedy-easy, single-site-easy]\nsweep: {p: " + seq(200, "%.4f", 1, 0.001) + ", bandwidth: " + seq(30, "%gMB/s", 1, 1) + ", workload: [1, 2]}\n", "sweep", "at most 10000"},
		{"procs huge", ref("procs: 1099511627776"), "reference.procs", "from 1 to 1048576"},
		{"mean_bsld Inf", ref("mean_bsld: .inf"), "reference.mean_bsld", "positive number"},
		{"mean_bsld NaN", ref("mean_bsld: .nan"), "reference.mean_bsld", "positive number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("h.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.src)
			}
			if !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err %q\nwant ErrValue naming %s and saying %q", err, tc.field, tc.says)
			}
		})
	}
}

// TestArrivalScaleOverflow: a factor that would push a submit time past
// what a time.Duration holds is an error, not a negative submit time.
func TestArrivalScaleOverflow(t *testing.T) {
	w := Workload{ArrivalScale: 1000, Wide: []int64{11, 32}, SizeMB: []float64{1, 100}}
	jobs := tinyTrace(t)
	if _, err := shapeJobs(jobs, w, 1, 3); err != nil {
		t.Fatalf("a short trace at 1000x: %v", err)
	}
	jobs[len(jobs)-1].Submit = 1e8 // seconds: 1e11 s after scaling, past 2^63 ns
	if _, err := shapeJobs(jobs, w, 1, 3); err == nil || !strings.Contains(err.Error(), "workload.arrival_scale") {
		t.Fatalf("submit 1e8 s x 1000: %v, want an arrival_scale error", err)
	}
}

// tinyTrace is three small jobs submitted a minute apart.
func tinyTrace(t *testing.T) []swf.Job {
	t.Helper()
	var jobs []swf.Job
	for i := range 3 {
		jobs = append(jobs, swf.Job{ID: int64(i + 1), Submit: int64(60 * i), Run: 100, Alloc: 2, ReqProcs: 2, ReqTime: 200, Status: 1})
	}
	return jobs
}
