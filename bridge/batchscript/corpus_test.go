package batchscript

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the corpus's expected results")

// TestCorpus parses every script of testdata/corpus (SLURM *.sh, PBS
// *.pbs) and compares the translation with NAME.want.json, or the refusal
// with NAME.err. -update rewrites them (review the diff).
func TestCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/corpus/*.sh")
	pbs, _ := filepath.Glob("testdata/corpus/*.pbs")
	files = append(files, pbs...)
	if len(files) < 40 {
		t.Fatalf("the corpus has %d scripts; want at least 40", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			base := strings.TrimSuffix(f, filepath.Ext(f))
			name := filepath.Base(f)
			spec, err := Parse(name, data, Options{Environ: []string{"HOME=/home/u"}})
			var got []byte
			wantFile := base + ".want.json"
			if err != nil {
				if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrValue) && !errors.Is(err, ErrScript) {
					t.Fatalf("error %v wraps no sentinel", err)
				}
				got, wantFile = []byte(err.Error()+"\n"), base+".err"
			} else {
				got, _ = json.MarshalIndent(spec, "", "  ")
				got = append(got, '\n')
				// The rendered script must be valid bash (bash -n in
				// TestScriptSyntax) and carry the body.
				if !strings.Contains(spec.Script(), strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])) {
					t.Errorf("the rendered script lacks the body")
				}
			}
			if *update {
				os.Remove(base + ".err")
				os.Remove(base + ".want.json")
				if err := os.WriteFile(wantFile, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("%v (a translation or an error was expected; the parser gave:\n%s)", err, got)
			}
			if string(want) != string(got) {
				t.Errorf("%s:\n got: %s\nwant: %s", wantFile, got, want)
			}
		})
	}
}
