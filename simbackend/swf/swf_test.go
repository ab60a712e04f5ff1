package swf

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readAll(t *testing.T, r *Reader) []Job {
	t.Helper()
	var out []Job
	for {
		j, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, j)
	}
}

func TestReaderSmall(t *testing.T) {
	r, err := Open("testdata/small.swf")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n, err := r.Header.Int("MaxNodes"); err != nil || n != 8 {
		t.Fatalf("MaxNodes = %d, %v; want 8 (leading integer of a value with trailing text)", n, err)
	}
	if q := r.Header["Queue"]; len(q) != 2 || q[1] != "2 B" {
		t.Fatalf("Queue values = %q", q)
	}
	if _, ok := r.Header["http"]; ok {
		t.Fatal("a continuation line was taken for a header key")
	}
	if _, err := r.Header.Int("Computer"); !errors.Is(err, ErrNoHeader) {
		t.Fatalf("Int on a non-numeric value: %v", err)
	}
	if _, err := r.Header.Int("MaxJobs"); !errors.Is(err, ErrNoHeader) {
		t.Fatalf("Int on a missing key: %v", err)
	}
	jobs := readAll(t, r)
	if len(jobs) != 9 {
		t.Fatalf("read %d jobs, want 9 (blank line skipped)", len(jobs))
	}
	want := Job{ID: 1, Submit: 0, Wait: 10, Run: 100, Alloc: 4, AvgCPU: 142, UsedMem: -1, ReqProcs: -1,
		ReqTime: 200, ReqMem: -1, Status: 1, User: 97, Group: -1, Exe: 307, Queue: 3, Partition: -1, Prev: -1, Think: -1}
	if jobs[0] != want {
		t.Fatalf("job 1 = %+v\nwant    %+v", jobs[0], want)
	}
	if jobs[0].Width() != 4 || jobs[1].Width() != 2 {
		t.Fatal("Width should prefer requested processors, else allocated")
	}
	if jobs[8].ID != 9 || r.Line() != 19 {
		t.Fatalf("last job %d at line %d", jobs[8].ID, r.Line())
	}
}

func TestReaderGzipSameAsPlain(t *testing.T) {
	plain, err := os.ReadFile("testdata/small.swf")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(plain)
	zw.Close()
	a, err := NewReader(bytes.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if ja, jb := readAll(t, a), readAll(t, b); !reflect.DeepEqual(ja, jb) || len(ja) == 0 {
		t.Fatal("gzip and plain readings differ")
	}
}

func TestReaderMalformed(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"short_line.swf", "line 3: malformed SWF: 17 fields, want exactly 18"},
		{"bad_field.swf", `line 3: malformed SWF: field 9 "4x" is not a number`},
		{"long_line.swf", "line 1: malformed SWF: more than 18 fields"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r, err := Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q wrapping ErrMalformed", err, tc.want)
			}
		})
	}
}

func TestStrongFilter(t *testing.T) {
	r, err := Open("testdata/small.swf")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f := StrongFilter{MaxProcs: 8}
	var kept []Job
	for _, j := range readAll(t, r) {
		if f.Apply(&j) {
			kept = append(kept, j)
		}
	}
	type row struct{ id, run, alloc, req int64 }
	var got []row
	for _, j := range kept {
		got = append(got, row{j.ID, j.Run, j.Alloc, j.ReqProcs})
	}
	want := []row{{1, 100, 4, 4}, {2, 40, 2, 2}, {8, 30, 6, 6}, {9, 60, 8, 8}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
}

func TestShape(t *testing.T) {
	var jobs []Job
	for i := 0; i < 1000; i++ {
		jobs = append(jobs, Job{ID: int64(i + 1), Submit: int64(i), Run: 10, ReqTime: 20, Alloc: int64(1 + i%64), ReqProcs: int64(1 + i%64)})
	}
	w1, err := Shape(jobs, ShapeOptions{N: 500, WidthCap: 32, Sites: 3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Shape(jobs, ShapeOptions{N: 500, WidthCap: 32, Sites: 3, Seed: 7})
	if len(w1) != 500 || !reflect.DeepEqual(w1, again) {
		t.Fatal("shape must keep N jobs and be reproducible from its seed")
	}
	sites := [3]int{}
	for i, s := range w1 {
		if s.Width > 32 || s.Width != min(jobs[i].Width(), 32) {
			t.Fatalf("job %d width %d", i, s.Width)
		}
		if s.Size < MB || s.Size > 100*MB {
			t.Fatalf("size %d out of 1..100 MB", s.Size)
		}
		sites[s.SubmitSite]++
	}
	for i, n := range sites {
		if n < 120 || n > 215 {
			t.Fatalf("site %d got %d of 500 jobs: not uniform", i, n)
		}
	}
	w2, err := Shape(jobs, ShapeOptions{N: 500, WidthCap: 32, Sites: 3, Seed: 7, Wide90: true})
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i := range w2 {
		if w2[i].SubmitSite != w1[i].SubmitSite || w2[i].Size != w1[i].Size {
			t.Fatal("workload 2 must keep workload 1's sites and sizes")
		}
		if w2[i].Width != w1[i].Width {
			changed++
			if w2[i].Width < 11 || w2[i].Width > 32 {
				t.Fatalf("redrawn width %d outside 11..32", w2[i].Width)
			}
		}
	}
	inRange := 0
	for _, s := range w2 {
		if s.Width >= 11 {
			inRange++
		}
	}
	if changed < 300 || inRange < 450 {
		t.Fatalf("workload 2: %d redrawn, %d wide of 500", changed, inRange)
	}
	if _, err := Shape(jobs, ShapeOptions{Sites: 0}); err == nil {
		t.Fatal("zero sites must be refused")
	}
}

// TestShaperMatchesShape: shaping job by job gives Shape's workload, draw
// for draw, stops after N jobs, and refuses Workload 2.
func TestShaperMatchesShape(t *testing.T) {
	var jobs []Job
	for i := 0; i < 700; i++ {
		jobs = append(jobs, Job{ID: int64(i + 1), Submit: int64(i), Run: 10, ReqTime: 20, Alloc: int64(1 + i%64), ReqProcs: -1})
	}
	o := ShapeOptions{N: 500, WidthCap: 32, Sites: 3, Seed: 11}
	want, err := Shape(jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := NewShaper(o)
	if err != nil {
		t.Fatal(err)
	}
	var got []Shaped
	for i := range jobs {
		s, ok := sh.Next(&jobs[i])
		if !ok {
			break
		}
		got = append(got, s)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the shaper's %d jobs differ from Shape's %d", len(got), len(want))
	}
	o.Wide90 = true
	if _, err := NewShaper(o); !errors.Is(err, ErrNeedsAll) {
		t.Fatalf("Workload 2 one job at a time: err = %v, want ErrNeedsAll", err)
	}
}

func TestCTCTraceFilter(t *testing.T) {
	dir, ok := WorkloadsDir()
	if !ok {
		t.Skipf("workload traces not found (set GRIDSUB_WORKLOADS or put them in ../shared/workloads; looked in %q)", dir)
	}
	r, err := Open(filepath.Join(dir, "CTC-SP2-1996-3.1-cln.swf.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	maxp, err := r.Header.Int("MaxNodes")
	if err != nil || maxp != 338 {
		t.Fatalf("MaxNodes = %d, %v", maxp, err)
	}
	f := StrongFilter{MaxProcs: maxp}
	total, kept := 0, 0
	prev := int64(-1)
	for {
		j, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		total++
		if j.Submit < prev {
			t.Fatalf("submit times decrease at job %d", j.ID)
		}
		prev = j.Submit
		if f.Apply(&j) {
			kept++
		}
	}
	if total != 77222 || kept != 77199 {
		t.Fatalf("read %d, kept %d; want 77222 and 77199", total, kept)
	}
}

func TestReadJobs(t *testing.T) {
	r, err := Open("testdata/small.swf")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	jobs, err := ReadJobs(r, StrongFilter{MaxProcs: 8}.Apply, 3)
	if err != nil || len(jobs) != 3 || jobs[2].ID != 8 {
		t.Fatalf("ReadJobs = %v, %v; want jobs 1, 2, 8", jobs, err)
	}
	rest, err := ReadJobs(r, nil, 0)
	if err != nil || len(rest) != 1 || rest[0].ID != 9 {
		t.Fatalf("rest = %v, %v", rest, err)
	}
	bad, _ := Open("testdata/bad_field.swf")
	defer bad.Close()
	if got, err := ReadJobs(bad, nil, 0); !errors.Is(err, ErrMalformed) || len(got) != 1 {
		t.Fatalf("malformed: %v, %v", got, err)
	}
}

// TestSizeHintBounded: a header announcing 2^24 records (or more) does not
// make ReadJobs reserve gigabytes before reading a line.
func TestSizeHintBounded(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"; MaxRecords: 16777216\n", MaxSizeHint},
		{"; MaxRecords: 9223372036854775807\n", MaxSizeHint},
		{"; MaxJobs: 77222\n", 77222},
		{"; MaxRecords: -5\n", 1024},
		{"", 1024},
	} {
		r, err := NewReader(strings.NewReader(tc.header + "1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.SizeHint(); got != tc.want {
			t.Errorf("%q: SizeHint %d, want %d", tc.header, got, tc.want)
		}
	}
}
