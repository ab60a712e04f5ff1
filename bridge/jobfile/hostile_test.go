package jobfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// TestNumbersBounded: every numeric field of a job file refuses values that
// would overflow later (durations, sizes, counts, benefit values, times),
// naming the field at its line; the largest valid values still parse.
func TestNumbersBounded(t *testing.T) {
	job := func(res, rest string) string {
		return "name: t\ncommand: [x]\nresources: {" + res + "}\n" + rest
	}
	wall := "nodes: 1, walltime: 1h"
	cases := []struct {
		name, src, field, text string
	}{
		{"walltime 999999999h", job("nodes: 1, walltime: 999999999h", ""), "resources.walltime", "cannot read"},
		{"walltime 100000d", job("nodes: 1, walltime: 100000d", ""), "resources.walltime", "at most 8760h0m0s"},
		{"walltime 366d", job("nodes: 1, walltime: 366d", ""), "resources.walltime", "at most"},
		{"walltime day overflow", job("nodes: 1, walltime: 100000d2562047h", ""), "resources.walltime", "too long"},
		{"walltime clock huge", job("nodes: 1, walltime: \"99999-999999:00:00\"", ""), "resources.walltime", "too long"},
		{"walltime clock long", job("nodes: 1, walltime: \"9999-00:00:00\"", ""), "resources.walltime", "at most"},
		{"walltime negative", job("nodes: 1, walltime: -5m", ""), "resources.walltime", "must be > 0"},
		{"walltime NaN", job("nodes: 1, walltime: .nan", ""), "resources.walltime", "cannot read"},
		{"nodes 2^40", job("nodes: 1099511627776, walltime: 1h", ""), "resources.nodes", "at most 1048576"},
		{"nodes negative", job("nodes: -4, walltime: 1h", ""), "resources.nodes", "got -4"},
		{"nodes 2^64", job("nodes: 18446744073709551616, walltime: 1h", ""), "resources.nodes", "whole number"},
		{"cores 2^40", job("nodes: 1, cores_per_node: 1099511627776, walltime: 1h", ""), "resources.cores_per_node", "at most"},
		{"cores negative", job("nodes: 1, cores_per_node: -1, walltime: 1h", ""), "resources.cores_per_node", "got -1"},
		{"runtime huge", job(wall, "simulate: {runtime: 100000d}\n"), "simulate.runtime", "at most"},
		{"exit code", job(wall, "simulate: {exit_code: 4294967296}\n"), "simulate.exit_code", "0..255"},
		{"data_size 9EiB", job(wall, "scheduling: {origin: A, data_size: 9EiB}\n"), "scheduling.data_size", "cannot read"},
		{"data_size 8000000TiB", job(wall, "scheduling: {origin: A, data_size: 8000000TiB}\n"), "scheduling.data_size", "64 TiB"},
		{"data_size 1e30", job(wall, "scheduling: {origin: A, data_size: \"99999999999999999999999999999999\"}\n"), "scheduling.data_size", "too large"},
		{"data_size negative", job(wall, "scheduling: {origin: A, data_size: -1MB}\n"), "scheduling.data_size", "negative"},
		{"deadline 20y", job(wall, "scheduling: {deadline: +7300d}\n"), "scheduling.deadline", "more than 10 years"},
		{"earliest 20y", job(wall, "scheduling: {reservation: {earliest_start: +7300d}}\n"), "scheduling.reservation.earliest_start", "more than 10 years"},
		{"flexibility near 1", job(wall, "scheduling: {reservation: {earliest_start: +1h, flexibility: 0.9999999999}}\n"), "scheduling.reservation.flexibility", "longer than 10 years"},
		{"flexibility NaN", job(wall, "scheduling: {reservation: {earliest_start: +1h, flexibility: .nan}}\n"), "scheduling.reservation.flexibility", "in [0, 1)"},
		{"benefit a huge", job(wall, "scheduling: {deadline: +1h, benefit: {a: 1e300, b: 1, c: 1}}\n"), "scheduling.benefit.a", "at most 1e+15"},
		{"benefit c inf", job(wall, "scheduling: {deadline: +1h, benefit: {a: 1, b: 1, c: .inf}}\n"), "scheduling.benefit.c", "must be"},
		{"benefit b NaN", job(wall, "scheduling: {deadline: +1h, benefit: {a: 1, b: .nan, c: 1}}\n"), "scheduling.benefit.b", "must be"},
		{"env reserved wrapper var", job(wall, "env: {gridsub_rc: \"0\"}\n"), "env.gridsub_rc", "reserved"},
		{"env metachars", job(wall, "env: {\"A;id\": x}\n"), "env.A;id", "not a valid environment variable name"},
		{"env value huge", job(wall, "env: {A: \""+strings.Repeat("v", jobrules.MaxEnvValue+1)+"\"}\n"), "env.A", "at most 65536"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(c.src))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse accepted or failed without a FieldError: %v", err)
			}
			if fe.Field != c.field || fe.Pos.Line == 0 || !strings.Contains(fe.Msg, c.text) {
				t.Fatalf("got %v (field %q line %d), want field %q with %q", err, fe.Field, fe.Pos.Line, c.field, c.text)
			}
		})
	}
	// The limits themselves are fine.
	j, err := Parse("t.yaml", []byte(job("nodes: 1048576, cores_per_node: 1048576, walltime: 365d",
		"scheduling: {origin: A, data_size: 1PiB1, deadline: +3650d}\n")))
	if err == nil {
		t.Fatalf("a bad size unit parsed: %+v", j)
	}
	j, err = Parse("t.yaml", []byte(job("nodes: 1048576, cores_per_node: 1048576, walltime: 365d",
		"scheduling: {origin: A, data_size: 64TiB, deadline: +3650d, benefit: {a: 1e15, b: 1, c: 1e15}}\n")))
	if err != nil {
		t.Fatalf("the limits themselves: %v", err)
	}
	if j.Resources.Walltime != jobrules.MaxWalltime || j.Scheduling.DataSize != jobrules.MaxDataSize {
		t.Fatalf("parsed %+v", j)
	}
	// An absolute time far ahead is refused once the submission is known.
	j, err = Parse("t.yaml", []byte(job(wall, "scheduling: {deadline: \"9999-12-31T23:59:59Z\"}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Resolve(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)); !errors.Is(err, ErrTime) || !strings.Contains(err.Error(), "scheduling.deadline: 9999-12-31T23:59:59Z is more than 10 years after") {
		t.Fatalf("Resolve of a year-9999 deadline: %v", err)
	}
	// Year 0001 is the zero time: it would read as "no deadline".
	for _, d := range []string{"0001-01-01T00:00:00Z", "0001-01-01T00:00:01Z", "1969-12-31T23:59:59Z"} {
		_, err = Parse("t.yaml", []byte(job(wall, "scheduling: {deadline: \""+d+"\"}\n")))
		if !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), "scheduling.deadline: "+d+" is before 1970") {
			t.Errorf("deadline %s: %v", d, err)
		}
	}
}

// TestLoadRefusesSpecialFiles: Load refuses a FIFO (without waiting for a
// writer), a device such as /dev/zero (without reading it), a directory and
// a file over MaxFileSize, each with ErrFile and a message that says why.
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "job.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(minimal+"# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ file, want string }{
		{fifo, "named pipe (FIFO)"},
		{"/dev/zero", "character device"},
		{dir, "is a directory"},
		{big, "may be at most 1048576 (1 MiB)"},
	}
	for _, c := range cases {
		done := make(chan error, 1)
		go func() {
			_, err := Load(c.file)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.file) {
				t.Errorf("Load(%s) = %v; want ErrFile naming the file and %q", c.file, err, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) still running after 5s", c.file)
		}
	}
}
