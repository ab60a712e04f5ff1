package sshsite

import (
	"strings"
	"testing"
)

// FuzzParseO: any squeue -O specification either is refused or gives
// fields with widths of at most maxFieldWidth, and a line built with them
// stays bounded.
func FuzzParseO(f *testing.F) {
	for _, s := range []string{"JobID:0 ,State:0", "JobID:2147483647", "JobID:99999999999999999999", "JobID:4096", ":", ",", "JobID",
		"JobID:12x,Name:", "JobID:-1", strings.Repeat("JobID:4096,", 10)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		fs, ws, ok := parseO(spec)
		if !ok {
			return
		}
		if len(fs) != len(ws) {
			t.Fatalf("%d fields, %d widths", len(fs), len(ws))
		}
		for i, w := range ws {
			if w < 0 || w > maxFieldWidth {
				t.Fatalf("field %d of %q has width %d", i, spec, w)
			}
			if fs[i].name == "" {
				t.Fatalf("field %d of %q has no name", i, spec)
			}
		}
	})
}

// FuzzLimBuf: whatever is written, a limBuf holds at most maxOutput
// bytes and says when it dropped some.
func FuzzLimBuf(f *testing.F) {
	f.Add([]byte("abc"), 3, uint8(0))
	f.Add([]byte{}, 0, uint8(1))
	f.Fuzz(func(t *testing.T, chunk []byte, times int, how uint8) {
		times = min(max(times, 0), 64)
		var b limBuf
		total := 0
		for range times {
			switch how % 3 {
			case 0:
				b.Write(chunk)
			case 1:
				b.WriteString(string(chunk))
			default:
				for _, c := range chunk {
					b.WriteByte(c)
				}
			}
			total += len(chunk)
		}
		if b.Len() > maxOutput || (total <= maxOutput && (b.over || b.Len() != total)) || (total > maxOutput && !b.over) {
			t.Fatalf("wrote %d, holds %d, over %v", total, b.Len(), b.over)
		}
	})
}
