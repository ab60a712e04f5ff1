package jobrules

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRelPath: whatever RelPath accepts stays inside the job directory:
// relative, no ".." component, no NUL, and cleaning it again changes
// nothing (but the trailing "/").
func FuzzRelPath(f *testing.F) {
	for _, s := range []string{"out.txt", "a/../b", "../x", "/etc/passwd", `a\..\..\x`, "~/x", "C:x", "results/", ".", "a/./b//c/"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, allowDot bool) {
		c, err := RelPath(s, allowDot)
		if err != nil {
			if c != "" {
				t.Fatalf("RelPath(%q) = %q with error %v", s, c, err)
			}
			return
		}
		bare := strings.TrimSuffix(c, "/")
		if bare == "" || path.IsAbs(bare) || strings.ContainsRune(c, 0) || strings.Contains(c, `\`) ||
			bare == ".." || strings.HasPrefix(bare, "../") || path.Clean(bare) != bare || bare == "." && !allowDot {
			t.Fatalf("RelPath(%q, %v) accepted %q", s, allowDot, c)
		}
	})
}

// FuzzConfine: whatever Confine accepts is inside the root once its links
// are resolved, and has no hidden name below the root. The root holds a
// link out of it and a hidden directory to trip over.
func FuzzConfine(f *testing.F) {
	base, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	root := filepath.Join(base, "root")
	for _, d := range []string{filepath.Join(root, "a"), filepath.Join(root, ".ssh"), filepath.Join(base, "out")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "out"), filepath.Join(root, "l")); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"a/x", "l/x", ".ssh/k", "../out", "a/../../out", "a/./b", "", "l", "a/..", "x/.y/z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		r, err := Confine(root+"/"+rel, []string{root}, "the root")
		if err != nil {
			return
		}
		below, ok := Within(root, r)
		if !ok {
			t.Fatalf("Confine(%q) = %q: outside %s", rel, r, root)
		}
		for _, c := range strings.Split(below, string(filepath.Separator)) {
			if strings.HasPrefix(c, ".") {
				t.Fatalf("Confine(%q) = %q: hidden %q", rel, r, c)
			}
		}
		if res, err := Resolve(r); err != nil || res != r {
			t.Fatalf("Confine(%q) = %q, which resolves to %q (%v)", rel, r, res, err)
		}
	})
}
