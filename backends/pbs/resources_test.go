package pbs

import (
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Memory and GPUs go into the select chunk (per node), the account is -A,
// and the job's queue replaces the site's.
func TestQsubArgsResources(t *testing.T) {
	s := &backends.JobSpec{GridID: "g9", Nodes: 2, CoresPerNode: 4, Walltime: time.Hour, Command: []string{"x"},
		MemPerNode: 3<<30 + 1, GPUsPerNode: 2, Partition: "gpuq", Account: "proj-42"}
	got := strings.Join(QsubArgs(s, "workq", 8), " ")
	for _, w := range []string{"-l select=2:ncpus=4:mem=3073mb:ngpus=2 ", "-A proj-42", "-q gpuq"} {
		if !strings.Contains(got, w) {
			t.Errorf("qsub args %q lack %q", got, w)
		}
	}
	if strings.Contains(got, "workq") {
		t.Errorf("the site's queue was kept: %q", got)
	}
	plain := strings.Join(QsubArgs(&backends.JobSpec{GridID: "g9", Nodes: 1, Walltime: time.Hour, Command: []string{"x"}}, "workq", 8), " ")
	if strings.Contains(plain, "mem=") || strings.Contains(plain, "ngpus") || strings.Contains(plain, " -A ") || !strings.Contains(plain, "-q workq") {
		t.Errorf("a job asking nothing: %q", plain)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"24684092kb": 24684092 << 10, "16gb": 16 << 30, "512MB": 512 << 20, "100": 100, "7b": 7} {
		if got, ok := ParseSize(in); !ok || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "lots", "-1kb", "99999999999999999pb"} {
		if _, ok := ParseSize(in); ok {
			t.Errorf("ParseSize(%q) ok", in)
		}
	}
}

// The real server's pbsnodes output gives each vnode's memory.
func TestParsePbsnodesMemory(t *testing.T) {
	nodes, err := ParsePbsnodes(fixture(t, "pbsnodes-a-json-idle.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) == 0 || nodes[0].MemBytes != 24684092<<10 || nodes[0].NGPUs != 0 {
		t.Fatalf("nodes %+v", nodes)
	}
}
