package sshbatch

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

func TestParseExitFilesAndGridDir(t *testing.T) {
	m := ParseExitFiles([]byte("/s/gridsub/g1/.gridsub-exit:0\n/s/gridsub/g-2-1/.gridsub-exit:137\nbroken\n"))
	if len(m) != 2 || m["/s/gridsub/g1/.gridsub-exit"] != 0 || m["/s/gridsub/g-2-1/.gridsub-exit"] != 137 {
		t.Errorf("exit files: %v", m)
	}
	for _, c := range []struct {
		dir, grid string
		want      bool
	}{
		{"/x/gridsub/g1", "g1", true}, {"/x/gridsub/abc-def-3", "abc-def", true}, {"/x/gridsub/ct-12-4", "ct-12-4", true},
		{"gridsub/ct-12-4", "ct-12-4", true}, {"/x/gridsub/g10", "g1", false}, {"/x/gridsub/g1-x", "g1", false},
		{"/x/other/g1", "g1", false}, {"/x/gridsub/g1-", "g1", false},
	} {
		if got := DirBelongs(c.dir, c.grid); got != c.want {
			t.Errorf("DirBelongs(%q, %q) = %v, want %v", c.dir, c.grid, got, c.want)
		}
	}
}

func TestParseFileList(t *testing.T) {
	out, err := os.ReadFile("testdata/find_outputs.out")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseFileList(out)
	if err != nil {
		t.Fatal(err)
	}
	var gotS []string
	for _, e := range got {
		gotS = append(gotS, string(e.Type)+" "+e.Path+" ("+e.TypeName()+")")
	}
	want := []string{"f a.log (regular file)", "p fifo (named pipe (FIFO))", "l leak (symbolic link)",
		"f name with\nnewline (regular file)", "l rootlink (symbolic link)", "s sock (socket)",
		"d sub (directory)", "f sub/b.log (regular file)", "l zero (symbolic link)"}
	if !slices.Equal(gotS, want) {
		t.Fatalf("got %q, want %q", gotS, want)
	}
	for _, bad := range []string{"f../etc/passwd\x00", "f/etc/passwd\x00", "fa/../../b\x00", "fa/..\x00", "f\x00"} {
		if _, err := ParseFileList([]byte(bad)); !errors.Is(err, backends.ErrBadOutput) {
			t.Errorf("%q: got %v, want ErrBadOutput", bad, err)
		}
	}
	if _, err := ParseFileList([]byte(strings.Repeat("fx\x00", MaxListEntries+1))); !errors.Is(err, backends.ErrBadOutput) {
		t.Errorf("a listing of %d entries: %v, want ErrBadOutput", MaxListEntries+1, err)
	}
}

// FuzzFiles: ParseExitFiles keeps "path:code" lines with a code a shell can
// return (0..255); ParseFileList gives sorted paths that stay inside the
// listed directory, or refuses the listing.
func FuzzFiles(f *testing.F) {
	f.Add([]byte("/w/gridsub/g-1/.gridsub-exit:3\nnocolon\n:7\n"))
	f.Add([]byte("a\x00b/c\x00x/../..\x00"))
	f.Add([]byte("fa\x00dsub\x00fsub/x\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for p, code := range ParseExitFiles(out) {
			if code < 0 || code > 255 {
				t.Errorf("exit file %q: code %d accepted", p, code)
			}
			if !strings.Contains(string(out), fmt.Sprintf("%s:", p)) {
				t.Errorf("exit file path %q not in the output", p)
			}
		}
		list, err := ParseFileList(out)
		if err != nil {
			if !errors.Is(err, backends.ErrBadOutput) {
				t.Fatalf("ParseFileList error %v does not wrap ErrBadOutput", err)
			}
			return
		}
		for i, e := range list {
			c := path.Clean(e.Path)
			if e.Path == "" || path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
				t.Errorf("file list entry %q escapes the directory", e.Path)
			}
			if i > 0 && list[i-1].Path > e.Path {
				t.Errorf("file list not sorted: %q before %q", list[i-1].Path, e.Path)
			}
		}
	})
}
