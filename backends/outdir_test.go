package backends_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

// TestOutputDirPlantedLinks: links planted in a local output directory are
// never written through: one at a file's name is replaced by the file (its
// target untouched), one in place of a subdirectory that leads outside is
// refused, and ".." and absolute names are refused; nothing appears
// outside the directory and no temp file is left.
func TestOutputDirPlantedLinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	if err := os.WriteFile(victim, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(victim, filepath.Join(dir, "stdout.txt")))
	must(os.Symlink(outside, filepath.Join(dir, "sub")))
	must(os.Symlink("/", filepath.Join(dir, "root")))
	must(os.Mkdir(filepath.Join(dir, "inside"), 0o755))
	must(os.Symlink("inside", filepath.Join(dir, "alias"))) // stays inside: allowed

	d, err := backends.OpenOutputDir(dir)
	must(err)
	defer d.Close()
	p, err := d.WriteFile("stdout.txt", []byte("job output"))
	if err != nil || p != filepath.Join(dir, "stdout.txt") {
		t.Fatalf("WriteFile over a planted link: %q %v", p, err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Errorf("written through the planted link: victim holds %q", b)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("stdout.txt is not a regular file now: %v %v", fi, err)
	}
	for _, rel := range []string{"sub/x.txt", "sub/deeper/x.txt", "root/tmp/x.txt", "../x.txt", "/tmp/x.txt", "a/../../x.txt", ""} {
		if _, err := d.WriteFile(rel, []byte("x")); err == nil {
			t.Errorf("WriteFile(%q) succeeded", rel)
		}
	}
	if _, err := d.WriteFile("alias/ok.txt", []byte("ok")); err != nil {
		t.Errorf("a link that stays inside: %v", err)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("outside now holds %d entries, want only victim.txt", len(ents))
	}
	if _, err := os.Stat("/tmp/x.txt"); err == nil {
		t.Errorf("/tmp/x.txt exists")
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".gridsub-part-") {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
	// A directory in the way of a file is refused, not replaced.
	must(os.Mkdir(filepath.Join(dir, "adir"), 0o755))
	if _, err := d.WriteFile("adir", []byte("x")); err == nil {
		t.Error("WriteFile over a directory succeeded")
	}
}
