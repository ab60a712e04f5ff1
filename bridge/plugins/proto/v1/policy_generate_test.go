package v1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// policyProtos are the policy kinds' protocols, as generate_policy.go
// names them.
var policyProtos = []string{"policy_common.proto", "feasibility.proto", "admission.proto", "trust.proto", "tiering.proto", "remap.proto", "order.proto"}

// TestPolicyGeneratedCodeIsFresh regenerates the policy kinds' .proto files
// into a temporary directory with generate_policy.go's command and fails
// when a committed *.pb.go or *_grpc.pb.go differs (or is missing): someone
// changed a .proto and did not run `go generate ./bridge/plugins/proto/v1`.
// It skips when protoc or the generators are not installed.
func TestPolicyGeneratedCodeIsFresh(t *testing.T) {
	path := os.Getenv("PATH")
	if gobin, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		path += string(os.PathListSeparator) + filepath.Join(string(bytes.TrimSpace(gobin)), "bin")
	}
	t.Setenv("PATH", path)
	for _, tool := range []string{"protoc", "protoc-gen-go", "protoc-gen-go-grpc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: cannot check the policy protocols' generated code is fresh (see generate_planner.go for the versions)", tool)
		}
	}
	out := t.TempDir()
	args := append([]string{"--go_out=" + out, "--go_opt=paths=source_relative",
		"--go-grpc_out=" + out, "--go-grpc_opt=paths=source_relative"}, policyProtos...)
	if b, err := exec.Command("protoc", args...).CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, b)
	}
	gen, err := filepath.Glob(filepath.Join(out, "*.go"))
	if err != nil || len(gen) < len(policyProtos) {
		t.Fatalf("protoc generated %v (%v)", gen, err)
	}
	for _, f := range gen {
		name := filepath.Base(f)
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s is not committed: run `go generate ./bridge/plugins/proto/v1`", name)
			continue
		}
		if !bytes.Equal(protocLine.ReplaceAll(got, nil), protocLine.ReplaceAll(want, nil)) {
			t.Errorf("%s is stale: run `go generate ./bridge/plugins/proto/v1` (with the generators generate_planner.go names) and commit the result", name)
		}
	}
}
