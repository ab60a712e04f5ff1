package swf

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Native fuzz targets of the SWF trace reader. The seeds are the package's
// testdata traces (good and malformed, plain and gzip-compressed);
// scripts/fuzz.sh runs each target for a bounded time.

// watchdog panics when one input runs longer than hangAfter: the fuzzer has
// no per-input timeout, and a panic makes it save the input as a crasher.
// Call it as defer watchdog(input)().
func watchdog(input any) (stop func()) {
	t := time.AfterFunc(hangAfter, func() { panic(fmt.Sprintf("input still running after %s: %q", hangAfter, input)) })
	return func() { t.Stop() }
}

const hangAfter = 10 * time.Second

func addTraces(f *testing.F) [][]byte {
	f.Helper()
	files, err := filepath.Glob("testdata/*.swf")
	if err != nil || len(files) < 3 {
		f.Fatalf("want at least 3 traces in testdata, found %v (%v)", files, err)
	}
	var all [][]byte
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		all = append(all, data)
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write(data)
		w.Close()
		all = append(all, gz.Bytes())
	}
	for _, d := range all {
		f.Add(d)
	}
	return all
}

// FuzzParseLine: ParseLine accepts exactly 18 fields, each a finite number
// within int64, truncates them as documented, and the job written back as
// a line parses to itself; anything else wraps ErrMalformed.
func FuzzParseLine(f *testing.F) {
	for _, data := range addTraces(f) {
		for _, l := range bytes.Split(data, []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 && l[0] != ';' && l[0] != 0x1f {
				f.Add(l)
			}
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		j, err := ParseLine(line)
		fields := strings.FieldsFunc(string(line), func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' })
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseLine(%q): error %v does not wrap ErrMalformed", line, err)
			}
			return
		}
		if len(fields) != NumFields {
			t.Fatalf("ParseLine(%q) accepted %d fields", line, len(fields))
		}
		got := []int64{j.ID, j.Submit, j.Wait, j.Run, j.Alloc, 0, j.UsedMem, j.ReqProcs, j.ReqTime, j.ReqMem, j.Status, j.User, j.Group, j.Exe, j.Queue, j.Partition, j.Prev, j.Think}
		for i, s := range fields {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1<<63 {
				t.Fatalf("ParseLine(%q) accepted field %d %q, not a finite number within int64", line, i+1, s)
			}
			if i == 5 {
				if j.AvgCPU != v {
					t.Fatalf("field 6 %q gave AvgCPU %v", s, j.AvgCPU)
				}
				continue
			}
			want := int64(v)
			if strings.Trim(strings.TrimLeft(s, "+-"), "0123456789") == "" {
				// A whole number is read exactly, whatever its length.
				if want, err = strconv.ParseInt(s, 10, 64); err != nil {
					t.Fatalf("ParseLine(%q) accepted field %d %q beyond int64", line, i+1, s)
				}
			}
			if got[i] != want {
				t.Fatalf("field %d %q gave %d, want %d", i+1, s, got[i], want)
			}
		}
		back := fmt.Sprintf("%d %d %d %d %d %s %d %d %d %d %d %d %d %d %d %d %d %d", j.ID, j.Submit, j.Wait, j.Run, j.Alloc,
			strconv.FormatFloat(j.AvgCPU, 'g', -1, 64), j.UsedMem, j.ReqProcs, j.ReqTime, j.ReqMem, j.Status, j.User, j.Group,
			j.Exe, j.Queue, j.Partition, j.Prev, j.Think)
		again, err := ParseLine([]byte(back))
		if err != nil || again != j {
			t.Fatalf("ParseLine(%q) = %+v, %v; want %+v", back, again, err, j)
		}
	})
}

// FuzzReader reads a whole trace, plain or gzip-compressed, through the
// strong filter and Workload 1's shaper, as the replay does. Errors name
// their line and wrap ErrMalformed (or a read error); kept jobs obey the
// filter's rules and shaped ones the width cap. Header values are trimmed.
func FuzzReader(f *testing.F) {
	addTraces(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(data)()
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			if r != nil || !strings.HasPrefix(err.Error(), "swf: ") {
				t.Fatalf("NewReader: %v", err)
			}
			return
		}
		defer r.Close()
		for k, vs := range r.Header {
			for _, v := range vs {
				if k == "" || strings.ContainsAny(k, " \t") || v != strings.TrimSpace(v) {
					t.Errorf("header %q: %q", k, v)
				}
			}
		}
		const maxProcs = 64
		filter := StrongFilter{MaxProcs: maxProcs}
		jobs, err := ReadJobs(r, filter.Apply, 0)
		if err != nil {
			var malformed = errors.Is(err, ErrMalformed)
			if !malformed && !errors.Is(err, bufio.ErrTooLong) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, gzip.ErrChecksum) &&
				!errors.Is(err, gzip.ErrHeader) && !strings.Contains(err.Error(), "flate") {
				t.Fatalf("ReadJobs: unexpected error %v", err)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Fatalf("ReadJobs: error %q names no line", err)
			}
		}
		if r.Line() < len(jobs) {
			t.Fatalf("%d jobs from %d lines", len(jobs), r.Line())
		}
		sh, err := NewShaper(ShapeOptions{Sites: 3, WidthCap: 32, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range jobs {
			j := &jobs[i]
			if j.Alloc < 1 || j.ReqProcs < 1 || j.Alloc > maxProcs || j.ReqProcs > maxProcs || j.Run < 1 || j.ReqTime < j.Run || j.Submit < 0 {
				t.Fatalf("the strong filter kept %+v", *j)
			}
			s, ok := sh.Next(j)
			if !ok || s.Width < 1 || s.Width > 32 || s.SubmitSite < 0 || s.SubmitSite > 2 || s.Size < MB || s.Size > 100*MB {
				t.Fatalf("shaped %+v", s)
			}
		}
		if h := r.SizeHint(); h < 1 || h > MaxSizeHint {
			t.Fatalf("SizeHint %d", h)
		}
	})
}
