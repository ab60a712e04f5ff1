package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// feBinaries builds gridsub-fe into a directory of its own beside a
// (hard-linked) gridsub, as `go install ./cmd/...` leaves them, and
// returns both paths.
func feBinaries(t *testing.T) (gridsub, fe string) {
	t.Helper()
	full := buildBinary(t)
	dir := t.TempDir()
	gridsub, fe = filepath.Join(dir, "gridsub"), filepath.Join(dir, "gridsub-fe")
	if err := os.Link(full, gridsub); err != nil {
		b, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(gridsub, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("go", "build", "-o", fe, "../gridsub-fe").CombinedOutput(); err != nil {
		t.Fatalf("go build gridsub-fe: %v\n%s", err, out)
	}
	return gridsub, fe
}

// TestFrontEndBinary: `gridsub shims install` links the front-ends to
// gridsub-fe when it lies beside gridsub; through those links (and as
// `gridsub-fe status --snakemake ID`) it answers as gridsub does; what it
// does not serve itself (--help, a daemon found through the
// configuration) it hands to gridsub, with the same answer.
func TestFrontEndBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries and runs the daemon")
	}
	gridsub, fe := feBinaries(t)
	d := t.TempDir()
	state := filepath.Join(d, "state")
	sock := filepath.Join(state, "gridsub.sock") // where gridsub finds it without GRIDSUB_SOCKET
	startServe(t, gridsub, state, sock, "--config", "testbed", "--time-scale", "60")
	base := slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "GRIDSUB_") })
	withSock := append(slices.Clone(base), envSocket+"="+sock)
	run := func(env []string, stdin string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, d
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s %q: %v\n%s%s", name, args, err, out, stderr)
		}
		return string(out)
	}

	shims := filepath.Join(d, "shims")
	if out := run(withSock, "", gridsub, "shims", "install", shims); !strings.Contains(out, "linked to "+fe) {
		t.Fatalf("shims install: %q, want the links to %s", out, fe)
	}
	for _, tool := range []string{"sbatch", "squeue", "sacct", "scancel", "scontrol", "qsub", "qstat", "qdel"} {
		if target, err := os.Readlink(filepath.Join(shims, tool)); err != nil || target != fe {
			t.Errorf("%s links to %q (%v), want %s", tool, target, err, fe)
		}
	}
	id := strings.TrimSpace(run(withSock, "", filepath.Join(shims, "sbatch"), "--parsable", "-J", "viafe", "-t", "30-00:00:00", "--wrap", "sleep 30d"))
	if !regexp.MustCompile(`^\d+$`).MatchString(id) {
		t.Fatalf("sbatch through gridsub-fe: %q", id)
	}
	pbs := strings.TrimSpace(run(withSock, "#!/bin/sh\n#PBS -N frompbs\n#PBS -l walltime=720:00:00\nsleep 3000000\n", filepath.Join(shims, "qsub")))
	if !strings.HasSuffix(pbs, ".gridsub") {
		t.Fatalf("qsub through gridsub-fe: %q", pbs)
	}
	waitFor(t, time.Minute, "both jobs running", func() bool {
		return run(withSock, "", fe, "squeue", "-h", "-o", "%t") == "R\nR\n"
	})
	// The same answers from both binaries, for every way of listing.
	for _, args := range [][]string{{"squeue"}, {"squeue", "-h", "-o", "%i %j %t"}, {"squeue", "-t", "all", "-j", id, "-o", "%i|%T|%l"},
		{"sacct", "-n", "-P", "-j", id, "--format", "JobIDRaw,JobName,State"}, {"scontrol", "show", "job", id}, {"qstat"},
		{"status", "--snakemake", id}, {"status", "--snakemake", "99999"}} {
		// The run times move with the daemon's clock (60 times real
		// time): a pair taken across a tick differs there; take another.
		var a, b string
		for range 5 {
			if a, b = run(withSock, "", gridsub, args...), run(withSock, "", fe, args...); a == b {
				break
			}
		}
		if a != b {
			t.Errorf("%q: gridsub printed %q, gridsub-fe %q", args, a, b)
		}
	}
	if got := run(withSock, "", fe, "squeue", "-h", "-o", "%j"); got != "viafe\nfrompbs\n" {
		t.Errorf("squeue -o %%j through gridsub-fe: %q", got)
	}
	if got := run(withSock, "", fe, "status", "--snakemake", id); got != "running\n" {
		t.Errorf("gridsub-fe status --snakemake %s: %q", id, got)
	}
	// Handed to gridsub: --help, and a daemon found through the state
	// directory (no GRIDSUB_SOCKET).
	if a, b := run(withSock, "", filepath.Join(shims, "squeue"), "--help"), run(withSock, "", gridsub, "squeue", "--help"); a != b || !strings.Contains(a, "Squeue lists") {
		t.Errorf("squeue --help through gridsub-fe: %q, gridsub's: %q", a, b)
	}
	viaState := append(slices.Clone(base), envStateDir+"="+state)
	if out := run(viaState, "", gridsub, "shims", "install", filepath.Join(d, "shims2")); !strings.Contains(out, "export "+envSocket+"="+sock+" ") {
		t.Errorf("shims install without %s does not say to set it to %s: %q", envSocket, sock, out)
	}
	if got := run(viaState, "", filepath.Join(shims, "squeue"), "-h", "-o", "%j"); got != "viafe\nfrompbs\n" {
		t.Errorf("squeue through the state directory: %q", got)
	}
	run(withSock, "", filepath.Join(shims, "scancel"), id)
	run(withSock, "", filepath.Join(shims, "qdel"), pbs)
	waitFor(t, time.Minute, "squeue empty after scancel and qdel", func() bool { return run(withSock, "", fe, "squeue", "-h") == "" })
	// Without gridsub beside it or on the PATH, a call it cannot serve
	// says what to do.
	alone := filepath.Join(t.TempDir(), "gridsub-fe")
	if err := os.Link(fe, alone); err != nil {
		t.Skip("cannot link gridsub-fe elsewhere:", err)
	}
	cmd := exec.Command(alone, "squeue", "--help")
	cmd.Env = append(slices.DeleteFunc(slices.Clone(base), func(e string) bool { return strings.HasPrefix(e, "PATH=") }), "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no gridsub is beside this executable or on the PATH") {
		t.Errorf("gridsub-fe alone: %v %q", err, out)
	}
}
