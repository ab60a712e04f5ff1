package pbs

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

func TestArrayRunsAndJRange(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{[]int{0, 1, 2, 3}, "0-3"}, {[]int{0, 1, 2, 7, 9}, "0-2 7-9:2"}, {[]int{4, 8, 12, 13}, "4-12:4 13"}, {[]int{5}, "5"},
	} {
		var got []string
		for _, r := range ArrayRuns(c.in) {
			if len(r) < 2 {
				got = append(got, fmt.Sprint(r[0]))
				continue
			}
			got = append(got, JRange(r))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("ArrayRuns(%v) = %v, want %s", c.in, got, c.want)
		}
	}
}

// TestArrayQsubArgs: a native array is tagged with its array's tag, is
// rerunnable (OpenPBS refuses -r n for arrays), takes -J and discards
// the array's own output (each element writes into its own directory).
func TestArrayQsubArgs(t *testing.T) {
	spec := &backends.JobSpec{GridID: backends.ElementTag("g7", 0, 2), Nodes: 1, CoresPerNode: 1, Walltime: time.Minute}
	a := ArrayQsubArgs(spec, "workq", 2, "g7", 2, []int{0, 1, 2})
	j := strings.Join(a, " ")
	for _, want := range []string{"-v " + TagVar + "=" + sshbatch.ArrayTag("g7", 2), "-r y", "-J 0-2", "-o /dev/null -e /dev/null", "-q workq", "-N g7"} {
		if !strings.Contains(j, want) {
			t.Errorf("qsub args %q lack %q", j, want)
		}
	}
	if slices.Contains(a, "n") {
		t.Errorf("qsub args %q keep -r n", j)
	}
}

// TestSubjobGridID: a subjob record carries its array's tag; its own grid
// tag comes back from that and its index.
func TestSubjobGridID(t *testing.T) {
	r := JobRecord{ID: "12[5].server", Vars: map[string]string{TagVar: sshbatch.ArrayTag("g000042", 1)}}
	if g := r.GridID(); g != "g000042_5-a1" {
		t.Fatalf("subjob grid id %q", g)
	}
	r.ID = "12[].server"
	if g := r.GridID(); g != "" {
		t.Fatalf("the array itself has grid id %q, want none", g)
	}
	r = JobRecord{ID: "13.server", Vars: map[string]string{TagVar: GridTag("g000042_5-a1")}}
	if g := r.GridID(); g != "g000042_5-a1" {
		t.Fatalf("a single job's grid id %q", g)
	}
	d := newDialect(Config{})
	if id := d.ElementID("12[].server", 7); id != "12[7].server" || !validJobID(string(id)) {
		t.Fatalf("ElementID %q", id)
	}
}
