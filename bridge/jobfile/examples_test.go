package jobfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// defaultSites are the site names of configs/testbed.yaml, which the
// examples are written for.
var defaultSites = []string{"Beijing", "Shanghai", "Harbin"}

// TestExamplesParse loads every job file in examples/: each must load, name
// only sites of the default testbed and produce a JobSpec that passes the
// backends' own validation.
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("found %d example job files, want at least 12", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			j, err := Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if err := j.CheckSites(defaultSites); err != nil {
				t.Errorf("CheckSites: %v", err)
			}
			jobs := []*Job{j}
			if j.IsPipeline() { // each step is a job
				jobs = j.Steps
			}
			for _, j := range jobs {
				spec := j.Spec("g-1")
				if err := spec.Validate(); err != nil {
					t.Errorf("Spec(...).Validate: %v", err)
				}
				for _, in := range spec.Inputs {
					if !filepath.IsAbs(in.Local) {
						t.Errorf("input %q not resolved to an absolute path", in.Local)
					}
				}
			}
		})
	}
}

// invalidHeader reads the "# expect: ..." and optional "# expect-sites: ..."
// header of an invalid example and the line marked "# ERROR".
func invalidHeader(t *testing.T, data []byte) (expect string, sites []string, line int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		switch {
		case n == 1:
			var ok bool
			if expect, ok = strings.CutPrefix(text, "# expect: "); !ok {
				t.Fatalf("first line %q is not `# expect: <substring>`", text)
			}
		case strings.HasPrefix(text, "# expect-sites: "):
			for _, s := range strings.Split(strings.TrimPrefix(text, "# expect-sites: "), ",") {
				sites = append(sites, strings.TrimSpace(s))
			}
		case strings.Contains(text, "# ERROR"):
			line = n
		}
	}
	if line == 0 {
		t.Fatal("no line marked `# ERROR`")
	}
	return expect, sites, line
}

// TestInvalidExamples loads every file in examples/invalid/: each must fail,
// with an error that contains the file's expected text and points at the
// line marked "# ERROR".
func TestInvalidExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("found %d invalid examples, want at least 12", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			expect, sites, line := invalidHeader(t, data)
			j, err := Load(f)
			if err == nil && sites != nil {
				err = j.CheckSites(sites)
			}
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", expect)
			}
			msg := err.Error()
			if !strings.Contains(msg, expect) {
				t.Errorf("error %q does not contain %q", msg, expect)
			}
			if at := fmt.Sprintf("%s:%d:", f, line); !strings.Contains(msg, at) {
				t.Errorf("error %q does not point at %s (the line marked # ERROR)", msg, at)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("errors.As(*FieldError) failed on %T", err)
			}
		})
	}
}
