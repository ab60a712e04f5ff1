package slurm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// runWrapper renders the wrapper for spec and runs it with bash in a fresh
// directory, as slurmstepd would (cwd = job directory).
func runWrapper(t *testing.T, spec *backends.JobSpec) (dir, stdout string, rc int) {
	t.Helper()
	dir = t.TempDir()
	script := filepath.Join(dir, ScriptFile)
	if err := os.WriteFile(script, []byte(Wrapper(spec)), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Dir = dir
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return dir, string(out), cmd.ProcessState.ExitCode()
}

func readExit(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ExitFile))
	if err != nil {
		t.Fatalf("exit file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

func TestWrapperCommandStaysLiteral(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "owned")
	spec := &backends.JobSpec{GridID: "g1", Nodes: 1, Walltime: time.Minute,
		Command: []string{"printf", "%s|", "$(touch " + canary + ")", "it's", "a b", "`id`", "$HOME", ""},
		Env:     map[string]string{"GREETING": "hello 'world' $(touch " + canary + ")"}}
	dir, out, rc := runWrapper(t, spec)
	if rc != 0 {
		t.Fatalf("rc = %d, want 0", rc)
	}
	want := "$(touch " + canary + ")|it's|a b|`id`|$HOME||"
	if out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("a quoted argument was executed")
	}
	if got := readExit(t, dir); got != "0" {
		t.Errorf("exit file = %q, want 0", got)
	}
}

func TestWrapperScriptEnvWorkDirAndExitCode(t *testing.T) {
	spec := &backends.JobSpec{GridID: "g2", Nodes: 1, Walltime: time.Minute, WorkDir: "sub/dir",
		Env: map[string]string{"X": "x y"},
		// The script contains the default here-document delimiter as a line.
		Script: "echo \"$X:$(basename \"$PWD\"):$GRIDSUB_GRID_ID\"\ncat <<GRIDSUB_USER_SCRIPT_END\nliteral $X\nGRIDSUB_USER_SCRIPT_END\nexit 7"}
	dir, out, rc := runWrapper(t, spec)
	if rc != 7 {
		t.Fatalf("rc = %d, want 7", rc)
	}
	if want := "x y:dir:g2\nliteral x y\n"; out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	if got := readExit(t, dir); got != "7" {
		t.Errorf("exit file = %q, want 7", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "dir")); err != nil {
		t.Errorf("work dir not created: %v", err)
	}
}

func TestCheckSpecRejects(t *testing.T) {
	base := func() *backends.JobSpec {
		return &backends.JobSpec{GridID: "g", Nodes: 1, Walltime: time.Minute, Command: []string{"true"}}
	}
	cases := map[string]func(*backends.JobSpec){
		"zero nodes":      func(s *backends.JobSpec) { s.Nodes = 0 },
		"no command":      func(s *backends.JobSpec) { s.Command = nil },
		"slash in gridid": func(s *backends.JobSpec) { s.GridID = "../x" },
		"bad env key":     func(s *backends.JobSpec) { s.Env = map[string]string{"A B": "1"} },
		"escaping input":  func(s *backends.JobSpec) { s.Inputs = []backends.StageFile{{Local: "x", Remote: "../x"}} },
		"absolute output": func(s *backends.JobSpec) { s.Outputs = []string{"/etc/passwd"} },
		"bad reservation": func(s *backends.JobSpec) { s.Reservation = "r 1" },
	}
	for name, mut := range cases {
		s := base()
		mut(s)
		err := checkSpec(s)
		if !errors.Is(err, backends.ErrInvalidSpec) {
			t.Errorf("%s: err = %v, want ErrInvalidSpec", name, err)
		}
	}
	if err := checkSpec(base()); err != nil {
		t.Errorf("valid spec rejected: %v", err)
	}
}

func TestSbatchArgs(t *testing.T) {
	s := &backends.JobSpec{GridID: "g7", Name: "a\nb $(x)", Nodes: 2, CoresPerNode: 3, Walltime: 61 * time.Second, Reservation: "r1"}
	got := strings.Join(SbatchArgs(s, "batch"), " ")
	want := "--parsable --job-name=a?b $(x) --comment=gridsub:g7 --partition=batch --reservation=r1 --nodes=2 --ntasks-per-node=1 --cpus-per-task=3 --time=2 --output=gridsub.out --error=gridsub.err"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	s2 := &backends.JobSpec{GridID: "g8", Nodes: 1, Walltime: time.Second}
	if got := strings.Join(SbatchArgs(s2, ""), " "); !strings.Contains(got, "--exclusive") || !strings.Contains(got, "--time=1 ") || !strings.Contains(got, "--job-name=g8 ") {
		t.Errorf("defaults: %s", got)
	}
}

// TestWrapperFirstWordIsACommand: a first word that looks like an
// assignment or a keyword is run as a program of that name. With a program
// called "NAME=1" on PATH it runs (and gets the other words as arguments);
// without one, bash says "command not found" (127) instead of setting NAME
// and running the next word.
func TestWrapperFirstWordIsACommand(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"NAME=1", "if", "time"} {
		prog := "#!/bin/sh\nprintf 'ran %s:' \"$(basename \"$0\")\"; printf '%s|' \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(prog), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	for _, name := range []string{"NAME=1", "if", "time"} {
		spec := &backends.JobSpec{GridID: "g3", Nodes: 1, Walltime: time.Minute, Command: []string{name, "echo", "$NAME"}}
		dir, out, rc := runWrapper(t, spec)
		if want := "ran " + name + ":echo|$NAME|"; rc != 0 || out != want {
			t.Errorf("%s: rc %d, stdout %q; want 0, %q", name, rc, out, want)
		}
		if got := readExit(t, dir); got != "0" {
			t.Errorf("%s: exit file %q", name, got)
		}
	}
	os.Remove(filepath.Join(bin, "NAME=1"))
	spec := &backends.JobSpec{GridID: "g4", Nodes: 1, Walltime: time.Minute, Command: []string{"NAME=1", "printenv", "NAME"}}
	dir, out, rc := runWrapper(t, spec)
	if rc != 127 || out != "" {
		t.Errorf("NAME=1 printenv NAME without a program NAME=1: rc %d, stdout %q; want 127 and nothing (printenv must not run)", rc, out)
	}
	if got := readExit(t, dir); got != "127" {
		t.Errorf("exit file %q, want 127", got)
	}
}
