package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge/store"
)

// TestStoreCheckNeverSaysOkOnFailure: a file whose schema page is damaged
// makes SQLite's check fail outright, with no problem lines of its own;
// `store check` prints the failure (FAILED and the reason), never
// "quick_check ok" beside an error, and exits 1.
func TestStoreCheckNeverSaysOkOnFailure(t *testing.T) {
	p := filepath.Join(t.TempDir(), "damaged.db")
	s, err := store.Open(context.Background(), p, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetValue(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(strings.Repeat("\xa5", 3996)), 100) // the schema behind the 100-byte header
	f.Close()
	for _, quick := range []bool{true, false} {
		args := []string{"store", "check", "--file", p}
		if quick {
			args = append(args, "--quick")
		}
		code, stdout, stderr := cli(args...)
		if code != exitJobFailed || strings.Contains(stdout, "check ok") || !strings.Contains(stdout, "FAILED") || !strings.Contains(stdout, "malformed") {
			t.Fatalf("%v: exit %d\nstdout %s\nstderr %s\nwant exit %d and FAILED with the reason on stdout", args, code, stdout, stderr, exitJobFailed)
		}
		o := storeJSON(t, exitJobFailed, args...)
		if o.OK || len(o.Problems) == 0 {
			t.Fatalf("%v -o json: %+v, want not ok with the problem", args, o)
		}
	}
}
