package batchscript

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzParse: no input panics; every refusal is an Errors of sentinels;
// every translation has a valid shape and a script.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/corpus/*")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data, "")
		}
	}
	f.Add([]byte("#!/bin/sh\n#SBATCH --time=1 -N 2 --gres=gpu:1\n"), "--mem=4G")
	f.Fuzz(func(t *testing.T, data []byte, arg string) {
		var args []string
		if arg != "" && utf8.ValidString(arg) {
			args = []string{arg}
		}
		s, err := Parse("f.sh", data, Options{Args: args})
		if err != nil {
			if _, ok := err.(Errors); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if s.Nodes < 1 || s.CoresPerNode < 1 || s.Walltime <= 0 || s.Name == "" {
			t.Fatalf("bad shape %+v", s)
		}
		if s.Script() == "" || s.Job().Script == "" {
			t.Fatal("no script")
		}
	})
}
