package slurm_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

func TestArrayList(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{[]int{0}, "0"}, {[]int{0, 1, 2}, "0-2"}, {[]int{0, 2, 4, 5, 6}, "0,2,4-6"}, {[]int{3, 4, 9, 11, 12}, "3-4,9,11-12"},
	} {
		if got := slurm.ArrayList(c.in); got != c.want {
			t.Errorf("ArrayList(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseMaxArraySize(t *testing.T) {
	for in, want := range map[string]int{
		"MaxArraySize            = 1001\n": 1001, "MaxArraySize = 40000\n": 40000, "MaxJobCount = 10000\n": slurm.DefaultMaxArraySize,
		"MaxArraySize = 0\n": 0, "MaxArraySize = 1\n": 0, "MaxArraySize = lots\n": slurm.DefaultMaxArraySize,
	} {
		if got := slurm.ParseMaxArraySize([]byte(in)); got != want {
			t.Errorf("ParseMaxArraySize(%q) = %d, want %d", in, got, want)
		}
	}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseSqueueArray: elements of a native array read as <array>_<index>,
// each with its own grid tag derived from the array's tag.
func TestParseSqueueArray(t *testing.T) {
	recs, err := slurm.ParseSqueue(readTestdata(t, "squeue_array.out"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]backends.State{"_5": backends.StatePending, "_6": backends.StatePending, "_0": backends.StateRunning, "_2": backends.StateRunning}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for _, r := range recs {
		a, ix, ok := strings.Cut(string(r.Status.ID), "_")
		if !ok || a == "" || r.Status.State != want["_"+ix] || r.Status.GridID != "g000042_"+ix+"-a1" {
			t.Errorf("record %+v", r.Status)
		}
	}
}

// TestParseArrayElementRecords: scontrol and the jobcomp log name an
// element by a raw JobId of its own; it is read back as <array>_<index>.
func TestParseArrayElementRecords(t *testing.T) {
	sts, err := slurm.ParseScontrolJobs(readTestdata(t, "scontrol_array.out"), time.UTC)
	if err != nil || len(sts) != 1 || !strings.HasSuffix(string(sts[0].ID), "_0") || sts[0].GridID != "g000042_0-a1" {
		t.Fatalf("scontrol: %+v %v", sts, err)
	}
	recs, err := slurm.ParseJobComp(readTestdata(t, "jobcomp_array.out"), time.UTC)
	if err != nil || len(recs) != 3 {
		t.Fatalf("jobcomp: %+v %v", recs, err)
	}
	for i, want := range []string{"1_", "1_", "2"} {
		if id := string(recs[i].Status.ID); !strings.HasPrefix(id, want) || (want == "2" && id != "2") {
			t.Errorf("jobcomp line %d: id %q, want %s...", i, id, want)
		}
	}
}

// TestJobCompArgvArrayElements: the jobcomp grep finds an element by its
// ArrayJobId and ArrayTaskId and a job by its JobId, checked by running
// the real grep over the captured lines.
func TestJobCompArgvArrayElements(t *testing.T) {
	argv := slurm.JobCompArgv("testdata/jobcomp_array.out", []backends.JobID{"2", "1_7", "1_77"})
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	recs, err := slurm.ParseJobComp(out, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, string(r.Status.ID))
	}
	if strings.Join(ids, " ") != "1_7 2" && strings.Join(ids, " ") != "2 1_7" {
		t.Fatalf("grep %q found %v, want 1_7 and 2", argv[2], ids)
	}
}

func TestArrayTagRoundTrip(t *testing.T) {
	tag := sshbatch.ArrayTag("g000042", 3)
	if p, a, ok := sshbatch.FromArrayTag(tag); !ok || p != "g000042" || a != 3 {
		t.Fatalf("FromArrayTag(%q) = %q %d %v", tag, p, a, ok)
	}
	for _, bad := range []string{"gridsub:g1-a1", "gridsub-array:g1", "gridsub-array:-a1", "gridsub-array:g1-a"} {
		if _, _, ok := sshbatch.FromArrayTag(bad); ok {
			t.Errorf("FromArrayTag(%q) accepted", bad)
		}
	}
	if p, ix, a, ok := backends.ArrayElement(backends.ElementTag("g000042", 57, 2)); !ok || p != "g000042" || ix != 57 || a != 2 {
		t.Fatalf("ArrayElement: %q %d %d %v", p, ix, a, ok)
	}
	for _, bad := range []string{"g000042-a1", "g000042_x-a1", "g000042_5", "g000042_5-a1-c1"} {
		if _, _, _, ok := backends.ArrayElement(bad); ok {
			t.Errorf("ArrayElement(%q) accepted", bad)
		}
	}
}

// TestArraySbatchThrottle: a native array carries the broker's limit of
// its grid array as SLURM's throttle (`%K`), and none without a limit.
func TestArraySbatchThrottle(t *testing.T) {
	spec := &backends.JobSpec{GridID: backends.ElementTag("a", 0, 1), Nodes: 1, Walltime: time.Minute, Command: []string{"true"}}
	argv := slurm.ArraySbatchArgv(spec, "", "a", 1, []int{0, 1, 2, 5}, "/r/gridsub")
	if !slices.Contains(argv, "--array=0-2,5") {
		t.Fatalf("no limit: %q, want --array=0-2,5", argv)
	}
	spec.ArrayLimit = 2
	argv = slurm.ArraySbatchArgv(spec, "", "a", 1, []int{0, 1, 2, 5}, "/r/gridsub")
	if !slices.Contains(argv, "--array=0-2,5%2") {
		t.Fatalf("limit 2: %q, want --array=0-2,5%%2", argv)
	}
}

// TestParseSacctTagged: accounting's records of a forgotten native array
// (testdata/sacct_tagged.out, captured) give each element's id, grid tag,
// state and exit code; a pending array's collapsed record and another
// comment are skipped; a short line is bad output.
func TestParseSacctTagged(t *testing.T) {
	out, err := os.ReadFile("testdata/sacct_tagged.out")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, "8_[0-9]|PENDING|0:0|Unknown|Unknown|gridsub-array:x-a1\n9_1|COMPLETED|0:0|1|2|someone else's\n"...)
	sts, err := slurm.ParseSacctTagged(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 6 {
		t.Fatalf("%d records, want the 6 elements: %+v", len(sts), sts)
	}
	for i, st := range sts {
		want, code := backends.StateCompleted, 0
		if i == 4 {
			want, code = backends.StateFailed, 7
		}
		if st.ID != backends.JobID(fmt.Sprintf("7_%d", i)) || st.GridID != backends.ElementTag("fgtx3567161921", i, 1) ||
			st.State != want || st.ExitCode != code || st.End.IsZero() {
			t.Errorf("record %d: %+v", i, st)
		}
	}
	if _, err := slurm.ParseSacctTagged([]byte("7_0|COMPLETED|0:0\n")); !errors.Is(err, backends.ErrBadOutput) {
		t.Fatalf("a short line: %v, want ErrBadOutput", err)
	}
}

// TestParseAssoc: the accounts of `sacctmgr show assoc` (captured at
// siteA with enforced associations), each once; none is nil.
func TestParseAssoc(t *testing.T) {
	out, err := os.ReadFile("testdata/sacctmgr_assoc.out")
	if err != nil {
		t.Fatal(err)
	}
	if got := slurm.ParseAssoc(append(out, "proj2\ngridsub\n\n"...)); !slices.Equal(got, []string{"gridsub", "proj2"}) {
		t.Fatalf("accounts %q, want gridsub, proj2", got)
	}
	if got := slurm.ParseAssoc(nil); got != nil {
		t.Fatalf("no association: %q, want nil (the site cannot say)", got)
	}
	if argv := slurm.AssocArgv("griduser"); !slices.Contains(argv, "user=griduser") || !slices.Contains(argv, "format=account") {
		t.Fatalf("AssocArgv: %q", argv)
	}
}
