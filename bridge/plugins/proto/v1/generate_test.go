package v1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGeneratedCodeIsFresh regenerates every .proto of this directory into
// a temporary directory with the go:generate command's flags and fails when
// a committed *.pb.go differs: run `go generate ./bridge/plugins/proto/...`
// and commit. It needs protoc, protoc-gen-go and protoc-gen-go-grpc (the
// versions generate.go names); scripts/test.sh installs them, and without
// them the test skips saying so.
func TestGeneratedCodeIsFresh(t *testing.T) {
	for _, tool := range []string{"protoc", "protoc-gen-go", "protoc-gen-go-grpc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH: cannot check the generated code (install it as proto/v1/generate.go says; scripts/test.sh does)", tool)
		}
	}
	protos, err := filepath.Glob("*.proto")
	if err != nil || len(protos) == 0 {
		t.Fatalf("no .proto files here (%v)", err)
	}
	out := t.TempDir()
	args := append([]string{"-I", ".", "--go_out=" + out, "--go_opt=paths=source_relative",
		"--go-grpc_out=" + out, "--go-grpc_opt=paths=source_relative"}, protos...)
	if b, err := exec.Command("protoc", args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	gen, _ := filepath.Glob(filepath.Join(out, "*.go"))
	if len(gen) < len(protos) {
		t.Fatalf("protoc generated %v for %v", gen, protos)
	}
	for _, g := range gen {
		want, _ := os.ReadFile(g)
		name := filepath.Base(g)
		have, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s is generated but not committed: run go generate ./bridge/plugins/proto/... and commit", name)
			continue
		}
		// Another protoc release generates the same code under another
		// version line: that line is left out of the comparison.
		if !bytes.Equal(protocLine.ReplaceAll(have, nil), protocLine.ReplaceAll(want, nil)) {
			t.Errorf("%s is stale: run go generate ./bridge/plugins/proto/... and commit (first difference at line %d)", name, firstDiff(have, want))
		}
	}
}

var protocLine = regexp.MustCompile(`(?m)^// [-\t ]*protoc +v\S+\n`)

func firstDiff(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
