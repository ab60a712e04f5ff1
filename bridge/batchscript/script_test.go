package batchscript

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScriptSyntax: every translated corpus script is valid bash.
func TestScriptSyntax(t *testing.T) {
	files, _ := filepath.Glob("testdata/corpus/*")
	for _, f := range files {
		if strings.HasSuffix(f, ".json") || strings.HasSuffix(f, ".err") {
			continue
		}
		data, _ := os.ReadFile(f)
		s, err := Parse(filepath.Base(f), data, Options{})
		if err != nil {
			continue
		}
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(s.Script())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: bash -n: %v\n%s", f, err, out)
		}
	}
}

// run runs a translated script in a fresh job directory with env, as a
// site's wrapper would, and returns the directory.
func run(t *testing.T, s *Spec, env ...string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", s.Script())
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "USER=tester", "GRIDSUB_JOB_ID=gxyz-000042", "GRIDSUB_JOB_DIR=" + dir}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the job failed: %v\n%s", err, out)
	}
	return dir, string(out)
}

// TestJobVariables: outside SLURM and PBS, the job sees their variables
// with gridsub's integer id; inside them, the site's own stay.
func TestJobVariables(t *testing.T) {
	body := "#!/bin/bash\n#SBATCH -J vars -N 1 -n 4 -t 5\n#SBATCH -o logs/%x-%j.out\necho \"id=$SLURM_JOB_ID n=$SLURM_NTASKS task=${SLURM_ARRAY_TASK_ID:-none} pbs=$PBS_JOBID name=$SLURM_JOB_NAME submit=$SLURM_SUBMIT_DIR num=$GRIDSUB_JOB_NUM\"\necho oops >&2\n"
	s, err := Parse("vars.sh", []byte(body), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := run(t, s)
	got, err := os.ReadFile(filepath.Join(dir, "logs", "vars-42.out"))
	if err != nil {
		t.Fatal(err)
	}
	want := "id=42 n=4 task=none pbs=42 name=vars submit=" + dir + " num=42\noops\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if j := s.Job(); len(j.Outputs) != 1 || j.Outputs[0] != "logs/" {
		t.Errorf("outputs %v, want [logs/]", j.Outputs)
	}
	// At a SLURM site the site's own id stays (srun needs it).
	dir, _ = run(t, s, "SLURM_JOB_ID=777", "SLURM_NTASKS=4")
	got, _ = os.ReadFile(filepath.Join(dir, "logs", "vars-42.out"))
	if !strings.HasPrefix(string(got), "id=777 ") {
		t.Errorf("at a SLURM site: %q", got)
	}
}

// TestArrayAndPBS: array elements see their index; a PBS script's -o with
// ^array_index^ and -j oe; no #! runs with bash.
func TestArrayAndPBS(t *testing.T) {
	body := "#PBS -N arr\n#PBS -J 1-4\n#PBS -l walltime=60\n#PBS -j oe\n#PBS -o out/task.^array_index^.log\necho \"$PBS_ARRAY_INDEX $SLURM_ARRAY_TASK_ID $PBS_ARRAY_ID $PBS_JOBNAME $PBS_JOBID\"\n"
	s, err := Parse("arr.pbs", []byte(body), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Walltime != time.Minute || s.Array != "1-4" {
		t.Fatalf("spec %+v", s)
	}
	dir, _ := run(t, s, "GRIDSUB_JOB_ID=gxyz-000040_3", "GRIDSUB_ARRAY_INDEX=3", "GRIDSUB_ARRAY_JOB_ID=gxyz-000040")
	got, err := os.ReadFile(filepath.Join(dir, "out", "task.3.log"))
	if err != nil || string(got) != "3 3 40 arr 40_3\n" {
		t.Errorf("got %q, %v", got, err)
	}
}

// TestChdirEnvInterpreter: --chdir, --export and a python #! line.
func TestChdirEnvInterpreter(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	body := "#!/usr/bin/env python3\n#SBATCH -t 1 --chdir=sub --export=NONE,GREETING=hi,FROMENV\n#SBATCH -o py.out\nimport os\nprint(os.environ['GREETING'], os.environ['FROMENV'], os.getcwd().endswith('/sub'))\n"
	s, err := Parse("py.sh", []byte(body), Options{Environ: []string{"FROMENV=there"}})
	if err != nil {
		t.Fatal(err)
	}
	j := s.Job()
	env := []string{}
	for k, v := range j.Env {
		env = append(env, k+"="+v)
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	cmd := exec.Command("bash", "-c", j.Script)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "GRIDSUB_JOB_ID=g-000007", "GRIDSUB_JOB_DIR=" + dir}, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "sub", "py.out"))
	if string(got) != "hi there True\n" {
		t.Errorf("got %q", got)
	}
}

// TestMail: END mail goes through the site's mail command.
func TestMail(t *testing.T) {
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "mail"), []byte("#!/bin/sh\necho \"$@\" >> \"$MAILLOG\"\ncat >> \"$MAILLOG\"\n"), 0o755)
	body := "#!/bin/bash\n#SBATCH -t 1 --mail-type=BEGIN,END --mail-user=a@b.org\nexit 0\n"
	s, err := Parse("m.sh", []byte(body), Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "mail.log")
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", s.Script())
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "MAILLOG=" + log, "GRIDSUB_JOB_ID=g-000009", "GRIDSUB_JOB_DIR=" + dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got, _ := os.ReadFile(log)
	if !strings.Contains(string(got), "-s gridsub job 9 (m.sh) began a@b.org") || !strings.Contains(string(got), "ended with exit code 0 a@b.org") {
		t.Errorf("mail log %q", got)
	}
}

// TestCommandLineOverrides: sbatch's options override the directives.
func TestCommandLineOverrides(t *testing.T) {
	s, err := Parse("x.sh", []byte("#!/bin/bash\n#SBATCH -t 10 -J a\n./x\n"), Options{Args: []string{"-t", "2:00:00", "--job-name=b", "--parsable"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Walltime != 2*time.Hour || s.Name != "b" {
		t.Errorf("%+v", s)
	}
	_, err = Parse("x.sh", []byte("#!/bin/bash\n./x\n"), Options{Args: []string{"--qos=x"}})
	if err == nil || !strings.HasPrefix(err.Error(), "command line: --qos=x:") {
		t.Errorf("got %v", err)
	}
}

func TestTimes(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90": 90 * time.Minute, "90:00": 90 * time.Minute, "1:30:00": 90 * time.Minute, "1-00:00:00": 24 * time.Hour,
		"2-12": 60 * time.Hour, "0-1:30": 90 * time.Minute, "5:30": 5*time.Minute + 30*time.Second,
	} {
		if got, err := SlurmTime(in); err != nil || got != want {
			t.Errorf("SlurmTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]time.Duration{"01:30:00": 90 * time.Minute, "600": 10 * time.Minute, "48:00:00": 48 * time.Hour, "10:00": 10 * time.Minute} {
		if got, err := PBSTime(in); err != nil || got != want {
			t.Errorf("PBSTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "1:2:3:4", "x", "-5", "1--2", "UNLIMITED"} {
		if _, err := SlurmTime(bad); err == nil {
			t.Errorf("SlurmTime(%q) accepted", bad)
		}
	}
	for in, want := range map[string]int64{"4G": 4 << 30, "4000M": 4000 << 20, "500": 500 << 20, "1T": 1 << 40, "512K": 512 << 10} {
		if got, err := SlurmSize(in); err != nil || got != want {
			t.Errorf("SlurmSize(%q) = %v, %v", in, got, err)
		}
	}
	for in, want := range map[string]int64{"16gb": 16 << 30, "512MB": 512 << 20, "100": 100, "2tb": 2 << 40} {
		if got, err := PBSSize(in); err != nil || got != want {
			t.Errorf("PBSSize(%q) = %v, %v", in, got, err)
		}
	}
}

func TestSplitArgs(t *testing.T) {
	for _, c := range []struct {
		d          Dialect
		args       []string
		opts, rest string
	}{
		{SLURM, []string{"-J", "x", "--time=5", "--mem", "4G", "--parsable", "job.sh", "-a", "b"}, "-J x --time=5 --mem 4G --parsable", "job.sh -a b"},
		{SLURM, []string{"-Jx", "--wrap", "echo hi"}, "-Jx --wrap echo hi", ""},
		{SLURM, []string{"--exclusive", "--", "-weird.sh"}, "--exclusive", "-weird.sh"},
		{PBS, []string{"-N", "n", "-l", "walltime=1:00", "-V", "-j", "oe", "job.pbs"}, "-N n -l walltime=1:00 -V -j oe", "job.pbs"},
	} {
		opts, rest := SplitArgs(c.d, c.args)
		if strings.Join(opts, " ") != c.opts || strings.Join(rest, " ") != c.rest {
			t.Errorf("SplitArgs(%v) = %q, %q; want %q, %q", c.args, opts, rest, c.opts, c.rest)
		}
	}
}
