package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleLate holds examples/late.yaml's comment true on the default
// simulated testbed: best-effort is accepted with a warning at once and
// runs (late) to completion; strict is refused with exit 1 (a job that can
// never run, as `validate` and the daemon say) and nothing runs.
func TestExampleLate(t *testing.T) {
	code, stdout, stderr := gridsub(t, "examples/late.yaml", "--output", "json", "--out-dir", t.TempDir())
	if code != 0 || !strings.Contains(stderr, "warning") || !strings.Contains(stderr, "no site can finish the job by its deadline") ||
		!strings.Contains(stdout, `"completed"`) {
		t.Fatalf("best-effort: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "late.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	strict := filepath.Join(t.TempDir(), "strict.yaml")
	os.WriteFile(strict, []byte(strings.Replace(string(raw), "\n  deadline_policy: best-effort\n", "\n  deadline_policy: strict\n", 1)), 0o644)
	code, stdout, stderr = gridsub(t, strict, "--out-dir", t.TempDir())
	// The refusal names the deadline and how late even the fastest
	// placement would end (bridge.Feasible, the one deadline rule).
	if code != exitJobFailed || !strings.Contains(stderr, "deadline") || !strings.Contains(stderr, "10m0s late") || strings.Contains(stdout, "completed") {
		t.Fatalf("strict: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}
