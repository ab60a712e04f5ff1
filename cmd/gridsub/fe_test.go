package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/frontend"
)

// TestFrontEndsOnSimulatedSites drives every front-end against a daemon on
// the simulated testbed: the formats SLURM's and PBS's clients parse, ids
// across a restart, the multi-call binary, and Snakemake's status contract.
func TestFrontEndsOnSimulatedSites(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	d := t.TempDir()
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	t.Setenv(envStateDir, state)
	p := startServe(t, bin, state, sock, "--time-scale", "3000")
	t.Chdir(d)

	script := "#!/bin/bash\n#SBATCH -J fe -t 10 -N 2\n#SBATCH --mail-type=NONE\necho hi\n"
	os.WriteFile("a.sh", []byte(script), 0o644)
	must := func(want int, args ...string) string {
		t.Helper()
		code, out, errs := cli(args...)
		if code != want {
			t.Fatalf("%s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out
	}
	if got := must(0, "sbatch", "a.sh"); got != "Submitted batch job 1\n" {
		t.Fatalf("sbatch: %q", got)
	}
	if got := must(0, "sbatch", "--parsable", "--wrap", "echo wrapped", "-t", "5"); got != "2\n" {
		t.Fatalf("sbatch --parsable --wrap: %q", got)
	}
	if got := must(0, "qsub", "-N", "pbsjob", "-l", "walltime=600,select=1:ncpus=2", "a.sh"); got != "3.gridsub\n" {
		t.Fatalf("qsub: %q", got)
	}
	// The engine owns retries: gridsub's request says so.
	c := api.NewUnixClient(sock)
	h, err := c.Health(context.Background())
	if err != nil || h.IDPrefix == "" {
		t.Fatalf("health: %+v %v", h, err)
	}
	j, err := c.Job(context.Background(), h.IDPrefix+"000001")
	if err != nil || !j.Req.NoRetry || j.Req.Nodes != 2 || j.Req.Name != "fe" || j.Req.Estimate != 10*time.Minute {
		t.Fatalf("job 1: %+v %v", j, err)
	}
	// A directive gridsub cannot honour: the tool's error, nothing queued.
	code, out, errs := cli("sbatch", "--constraint=skylake", "a.sh")
	if code != 1 || out != "" || !strings.HasPrefix(errs, "sbatch: error: command line: --constraint=skylake: node features") {
		t.Fatalf("sbatch --constraint: exit %d %q %q", code, out, errs)
	}

	waitFor(t, time.Minute, "jobs 1-3 completed", func() bool {
		_, out, _ := cli("sacct", "-n", "-P", "-j", "1,2,3", "--format", "JobIDRaw,State,ExitCode", "-S", "1970-01-01")
		return out == "1|COMPLETED|0:0\n2|COMPLETED|0:0\n3|COMPLETED|0:0\n"
	})
	if got := must(0, "squeue", "-h", "-o", "%i %j %t %D", "-t", "all"); got != "1 fe CD 2\n2 wrap CD 1\n3 pbsjob CD 1\n" {
		t.Errorf("squeue -t all: %q", got)
	}
	if got := must(0, "squeue"); got != "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n" {
		t.Errorf("squeue with nothing pending: %q", got)
	}
	sc := must(0, "scontrol", "show", "job", "2")
	for _, want := range []string{"JobId=2 JobName=wrap\n", " JobState=COMPLETED ", " ExitCode=0:0\n", " TimeLimit=00:05:00\n"} {
		if !strings.Contains(sc, want) {
			t.Errorf("scontrol show job lacks %q:\n%s", want, sc)
		}
	}
	// Toil reads SchedulerTimeSlice's number and unit after the "=".
	if !regexp.MustCompile(`(?m)^SchedulerTimeSlice +=\s+5 sec$`).MatchString(must(0, "scontrol", "show", "config")) {
		t.Errorf("scontrol show config lacks SchedulerTimeSlice")
	}
	if got := must(0, "status", "--snakemake", "2"); got != "success\n" {
		t.Errorf("status --snakemake: %q", got)
	}
	qf := must(0, "qstat", "-f", "3.gridsub")
	for _, want := range []string{"Job Id: 3.gridsub\n", "    Job_Name = pbsjob\n", "    job_state = F\n", "    Exit_status = 0\n", "    Resource_List.ncpus = 2\n"} {
		if !strings.Contains(qf, want) {
			t.Errorf("qstat -f lacks %q:\n%s", want, qf)
		}
	}

	// A failing job (simulated exit code 3) is "failed" for Snakemake.
	os.WriteFile("fail.yaml", []byte("name: fails\ncommand: [\"false\"]\nresources: {nodes: 1, walltime: 1m}\nsimulate: {exit_code: 3}\n"), 0o644)
	id := strings.TrimSpace(must(0, "submit", "fail.yaml", "-q"))
	num := frontend.FrontID(h.IDPrefix, id)
	waitFor(t, time.Minute, "the failing job to end", func() bool {
		_, out, _ := cli("status", "--snakemake", num)
		return out == "failed\n"
	})
	if got := must(0, "sacct", "-n", "-P", "-j", num, "--format", "JobIDRaw,State,ExitCode"); got != num+"|FAILED|3:0\n" {
		t.Errorf("sacct of the failing job: %q", got)
	}

	// scancel and qdel: recorded at once.
	long := strings.TrimSpace(must(0, "sbatch", "--parsable", "-t", "2-00:00:00", "--wrap", "sleep 1d"))
	pbs := strings.TrimSpace(must(0, "qsub", "-l", "walltime=48:00:00", "a.sh"))
	// squeue lists a job as soon as it is queued (GET /v1/queue).
	if q := must(0, "squeue", "-h", "-o", "%i"); !strings.Contains(q, long+"\n") || !strings.Contains(q, strings.TrimSuffix(pbs, ".gridsub")+"\n") {
		t.Errorf("squeue right after sbatch and qsub: %q", q)
	}
	start := time.Now()
	must(0, "scancel", long)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("scancel took %v", d)
	}
	must(0, "qdel", pbs)
	if code, _, errs := cli("scancel", "999"); code != 1 || !strings.Contains(errs, "Invalid job id specified") {
		t.Errorf("scancel 999: exit %d %q", code, errs)
	}
	waitFor(t, time.Minute, "both cancelled", func() bool {
		_, out, _ := cli("sacct", "-n", "-P", "-j", long+","+strings.TrimSuffix(pbs, ".gridsub"), "--format", "State")
		return strings.Count(out, "CANCELLED") == 2
	})

	// The ids survive a restart: the daemon keeps its prefix.
	p.term(t, sock)
	startServe(t, bin, state, sock, "--time-scale", "3000")
	if got := must(0, "status", "--snakemake", "2"); got != "success\n" {
		t.Errorf("after a restart, status --snakemake 2: %q", got)
	}
	if got := must(0, "sbatch", "--parsable", "--wrap", "true", "-t", "1"); got == "1\n" || got == "2\n" {
		t.Errorf("an id was reused after the restart: %q", got)
	}

	// The multi-call binary: a link named squeue is squeue.
	if out, err := exec.Command(bin, "shims", "install", filepath.Join(d, "shims")).CombinedOutput(); err != nil {
		t.Fatalf("shims install: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(d, "shims", "squeue"), "-h", "-t", "all", "-j", "2", "-o", "%i|%T")
	cmd.Env = append(os.Environ(), envSocket+"="+sock)
	if got, err := cmd.Output(); err != nil || string(got) != "2|COMPLETED\n" {
		t.Errorf("shims/squeue: %q %v", got, err)
	}
	// sbatch reads a script on stdin and copies it: the file can go.
	cmd = exec.Command(filepath.Join(d, "shims", "sbatch"), "-t", "1")
	cmd.Env = append(os.Environ(), envSocket+"="+sock)
	cmd.Stdin = strings.NewReader("#!/bin/sh\necho from stdin\n")
	if got, err := cmd.Output(); err != nil || !regexp.MustCompile(`^Submitted batch job \d+\n$`).MatchString(string(got)) {
		t.Errorf("sbatch from stdin: %q %v", got, err)
	}

	// No daemon: Snakemake's status poll must not end the workflow.
	t.Setenv(envSocket, filepath.Join(d, "nobody.sock"))
	code, out, errs = cli("status", "--snakemake", "2")
	if code != 0 || out != "running\n" || !strings.Contains(errs, "no gridsub daemon answers") {
		t.Errorf("status --snakemake without a daemon: exit %d %q %q", code, out, errs)
	}
	if code, _, errs := cli("squeue"); code != 1 || !strings.HasPrefix(errs, "squeue: error: no gridsub daemon answers") {
		t.Errorf("squeue without a daemon: exit %d %q", code, errs)
	}
}
