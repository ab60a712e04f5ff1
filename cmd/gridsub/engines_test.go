package main

// The workflow engines' acceptance tests: Debian 12's Snakemake 7.21 and
// Toil 5.9, unmodified, drive gridsub through its front-ends (gridsub
// shims install) as they would drive SLURM. Each test runs once per entry
// of engineSites.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
)

// engineSite is a kind of site the engines' jobs run on: the daemon's
// configuration, and the user the jobs run as there (the daemon, the
// engine and the jobs share one user and one file system).
type engineSite struct {
	name string
	// setup writes what the site needs into dir and returns the
	// configuration and the user ("" = the current one), or skips.
	setup func(t *testing.T, dir string) (config, user string)
}

// engineSites are the sites the engine tests run on: the built-in local
// site (real processes on this machine) and the real SLURM testbed.
var engineSites = []engineSite{
	{"local", func(t *testing.T, dir string) (string, string) {
		return "sites:\n  - name: here\n    kind: local\n", ""
	}},
	{"slurm", slurmEngineSite},
}

// slurmEngineSite is the real SLURM testbed's siteA. Its jobs run as the
// testbed's login user on this machine, so the daemon and the engine run
// as that user too, with a copy of the testbed's key.
func slurmEngineSite(t *testing.T, dir string) (string, string) {
	needSlurm(t)
	key, err := os.ReadFile(os.Getenv("GRIDSUB_SSH_KEY"))
	if err != nil {
		t.Skipf("the testbed's key: %v", err)
	}
	kh, err := os.ReadFile(os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS"))
	if err != nil {
		t.Skipf("the testbed's known_hosts: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "key"), key, 0o600)
	os.WriteFile(filepath.Join(dir, "known_hosts"), kh, 0o644)
	cfg := fmt.Sprintf(`sites:
  - name: siteA
    kind: slurm
    nodes: 8
    cores_per_node: %s
    partition: batch
    remote_dir: %s
    ssh:
      host: %s
      port: %s
      user: %s
      key_file: %s
      known_hosts: %s
      max_sessions: 8
broker:
  interval: 1s
`, or(os.Getenv("GRIDSUB_SITEA_CPUS_PER_NODE"), "2"), os.Getenv("GRIDSUB_SITEA_SCRATCH"), os.Getenv("GRIDSUB_SSH_HOST"),
		os.Getenv("GRIDSUB_SITEA_SSH_PORT"), os.Getenv("GRIDSUB_SSH_USER"), filepath.Join(dir, "key"), filepath.Join(dir, "known_hosts"))
	return cfg, os.Getenv("GRIDSUB_SSH_USER")
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// engineEnv is a daemon, its shims and a working directory, all owned by
// the site's user.
type engineEnv struct {
	t      *testing.T
	dir    string // everything lives here
	bin    string // the gridsub executable
	shims  string
	sock   string
	state  string
	config string
	cred   *syscall.Credential
	daemon *exec.Cmd
	done   chan error
	log    *bytes.Buffer
}

// needEngine skips without the engine's programs.
func needEngine(t *testing.T, progs ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a workflow engine")
	}
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s: `apt-get install -y -q snakemake toil` (scripts/test.sh does it)", p)
		}
	}
}

func newEngineEnv(t *testing.T, site engineSite) *engineEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", "gsengine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	e := &engineEnv{t: t, dir: dir, shims: filepath.Join(dir, "shims"), sock: filepath.Join(dir, "gs.sock"),
		state: filepath.Join(dir, "state"), config: filepath.Join(dir, "site.yaml")}
	cfg, who := site.setup(t, dir)
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	e.bin = filepath.Join(dir, "bin", "gridsub")
	data, err := os.ReadFile(buildBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if me, _ := user.Current(); who != "" && me != nil && me.Username != who {
		if os.Geteuid() != 0 {
			t.Skipf("the site's jobs run as %s: run the test as root or as %s", who, who)
		}
		u, err := user.Lookup(who)
		if err != nil {
			t.Skipf("user %s: %v", who, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		e.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error { return os.Lchown(p, uid, gid) })
	}
	e.startDaemon()
	if out, err := e.command(context.Background(), e.bin, "shims", "install", e.shims).CombinedOutput(); err != nil {
		t.Fatalf("shims install: %v\n%s", err, out)
	}
	return e
}

// env is the environment of everything the test runs: the shims first on
// PATH, then gridsub itself, then the system's.
func (e *engineEnv) env() []string {
	return []string{"PATH=" + e.shims + ":" + filepath.Dir(e.bin) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + e.dir,
		"GRIDSUB_SOCKET=" + e.sock, "GRIDSUB_STATE_DIR=" + e.state, "GRIDSUB_CONFIG=" + e.config, "LANG=C.UTF-8"}
}

func (e *engineEnv) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = e.env()
	cmd.Dir = e.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred, Setpgid: true}
	return cmd
}

func (e *engineEnv) startDaemon() {
	e.t.Helper()
	e.log = &bytes.Buffer{}
	e.daemon = e.command(context.Background(), e.bin, "serve")
	e.daemon.Stdout, e.daemon.Stderr = e.log, e.log
	if err := e.daemon.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.done = make(chan error, 1)
	cmd, done := e.daemon, e.done
	go func() { done <- cmd.Wait() }()
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := api.NewUnixClient(e.sock).Health(context.Background()); err == nil {
			return
		}
		select {
		case err := <-done:
			e.t.Fatalf("gridsub serve exited: %v\n%s", err, e.log)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the daemon does not answer after 30s\n%s", e.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killDaemon kills the daemon with SIGKILL, as a crash would.
func (e *engineEnv) killDaemon() {
	e.daemon.Process.Kill()
	<-e.done
}

// frontEnd runs a front-end (through its shim) and returns its stdout.
func (e *engineEnv) frontEnd(args ...string) string {
	e.t.Helper()
	var out, errb bytes.Buffer
	cmd := e.command(context.Background(), filepath.Join(e.shims, args[0]), args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("%s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// gridsub runs gridsub itself and returns its stdout.
func (e *engineEnv) gridsub(args ...string) string {
	e.t.Helper()
	out, err := e.command(context.Background(), e.bin, args...).Output()
	if err != nil {
		e.t.Fatalf("gridsub %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// accounting is sacct's view of every job: id -> name, state, exit code.
type acct struct{ id, name, state, exit string }

func (e *engineEnv) accounting() []acct {
	var out []acct
	for _, l := range strings.Split(strings.TrimSpace(e.frontEnd("sacct", "-n", "-P", "-S", "1970-01-01", "--format", "JobIDRaw,JobName,State,ExitCode")), "\n") {
		if f := strings.Split(l, "|"); len(f) == 4 {
			out = append(out, acct{f[0], f[1], f[2], f[3]})
		}
	}
	return out
}

// writeFiles writes files (relative name -> content) into the env's
// directory, owned by its user.
func (e *engineEnv) writeFiles(files map[string]string) {
	for name, content := range files {
		p := filepath.Join(e.dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			e.t.Fatal(err)
		}
		if e.cred != nil {
			os.Chown(filepath.Dir(p), int(e.cred.Uid), int(e.cred.Gid))
			os.Chown(p, int(e.cred.Uid), int(e.cred.Gid))
		}
	}
}

// snakemake runs Snakemake's generic cluster mode through the shims:
// --cluster sbatch, --cluster-status `gridsub status --snakemake`,
// --cluster-cancel scancel (one program, run without a shell).
func (e *engineEnv) snakemake(ctx context.Context, extra ...string) *exec.Cmd {
	args := append([]string{"--cluster", "sbatch --parsable -t 5 -J smk-{rule}-{jobid}",
		"--cluster-status", "gridsub status --snakemake", "--cluster-cancel", "scancel",
		"--latency-wait", "15", "--max-status-checks-per-second", "5", "--printshellcmds"}, extra...)
	return e.command(ctx, "snakemake", args...)
}

const flakySnakefile = `N = 18
rule all:
    input: "out/all.txt"

rule work:
    output: "out/w{i}.txt"
    shell: "sleep 1; echo work {wildcards.i} > {output}"

# Fails on its first run, succeeds when Snakemake retries it.
rule flaky:
    output: "out/flaky.txt"
    shell: "if [ ! -e flaky.marker ]; then touch flaky.marker; echo failing once >&2; exit 3; fi; echo ok > {output}"

rule gather:
    input: expand("out/w{i}.txt", i=range(N)), "out/flaky.txt"
    output: "out/all.txt"
    shell: "cat {input} > {output}"
`

// TestSnakemakeWorkflow: a 20-job workflow whose flaky rule fails once runs
// to its end with Snakemake's own retry; gridsub does not retry the
// failure itself, and the front-ends report every job as SLURM would.
func TestSnakemakeWorkflow(t *testing.T) {
	needEngine(t, "snakemake")
	for _, site := range engineSites {
		t.Run(site.name, func(t *testing.T) {
			e := newEngineEnv(t, site)
			e.writeFiles(map[string]string{"Snakefile": flakySnakefile})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			out, err := e.snakemake(ctx, "-j", "10", "--retries", "1").CombinedOutput()
			if err != nil {
				t.Fatalf("snakemake: %v\n%s\ndaemon:\n%s", err, out, e.log)
			}
			all, _ := os.ReadFile(filepath.Join(e.dir, "out", "all.txt"))
			if n := strings.Count(string(all), "\n"); n != 19 || !strings.Contains(string(all), "ok\n") {
				t.Fatalf("out/all.txt has %d lines:\n%s", n, all)
			}
			jobs := e.accounting()
			var failed, flakyOK, done int
			for _, j := range jobs {
				switch {
				case strings.HasPrefix(j.name, "smk-flaky") && j.state == "FAILED":
					failed++
					if !strings.Contains(e.frontEnd("scontrol", "show", "job", j.id), "Restarts=0 ") {
						t.Errorf("gridsub retried the failed job %s itself", j.id)
					}
					if got := e.gridsub("status", "--snakemake", j.id); got != "failed\n" {
						t.Errorf("status --snakemake %s = %q", j.id, got)
					}
				case strings.HasPrefix(j.name, "smk-flaky") && j.state == "COMPLETED":
					flakyOK++
				case j.state == "COMPLETED":
					done++
				default:
					t.Errorf("job %+v", j)
				}
			}
			// 18 work + gather, and flaky twice: 21 submissions, no more.
			if failed != 1 || flakyOK != 1 || done != 19 || len(jobs) != 21 {
				t.Fatalf("sacct: %d jobs, flaky failed %d and completed %d, others completed %d: %v", len(jobs), failed, flakyOK, done, jobs)
			}
		})
	}
}

// TestSnakemakeCtrlC: Ctrl-C on Snakemake cancels every job it submitted,
// through --cluster-cancel scancel, at the daemon and at the site.
func TestSnakemakeCtrlC(t *testing.T) {
	needEngine(t, "snakemake")
	for _, site := range engineSites {
		t.Run(site.name, func(t *testing.T) {
			e := newEngineEnv(t, site)
			e.writeFiles(map[string]string{"Snakefile": `rule all:
    input: expand("out/long{i}.txt", i=range(6))

rule long:
    output: "out/long{i}.txt"
    shell: "sleep 300; touch {output}"
`})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := e.snakemake(ctx, "-j", "6")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Every job submitted and some running (the local site runs as
			// many at once as this machine has cores; the others wait).
			waitFor(t, 3*time.Minute, "6 jobs submitted, some running", func() bool {
				return strings.Count(e.frontEnd("squeue", "-h", "-o", "%i"), "\n") == 6 &&
					strings.Count(e.frontEnd("squeue", "-h", "-t", "R", "-o", "%i"), "\n") >= 1
			})
			start := time.Now()
			cmd.Process.Signal(syscall.SIGINT) // Ctrl-C goes to Snakemake
			err := cmd.Wait()
			t.Logf("snakemake ended %v after Ctrl-C: %v", time.Since(start).Round(time.Millisecond), err)
			waitFor(t, 2*time.Minute, "every job cancelled", func() bool {
				jobs := e.accounting()
				for _, j := range jobs {
					if !strings.HasPrefix(j.state, "CANCELLED") {
						return false
					}
				}
				return len(jobs) == 6
			})
			// The front-end's queue is the daemon's view as of its last
			// cycle: the cancelled jobs leave it within a cycle or two.
			waitFor(t, 30*time.Second, "squeue without the cancelled jobs", func() bool {
				return strings.TrimSpace(e.frontEnd("squeue", "-h")) == ""
			})
			if site.name == "slurm" {
				waitFor(t, time.Minute, "the site's queue empty", func() bool { return realSqueue(t) == "" })
			}
			if !strings.Contains(out.String(), "scancel") && !strings.Contains(out.String(), "Cancelling") {
				t.Logf("snakemake's output:\n%s", out.String())
			}
		})
	}
}

// realSqueue is the testbed siteA's own queue of the login user.
func realSqueue(t *testing.T) string {
	cmd := exec.Command("squeue", "-h", "-u", os.Getenv("GRIDSUB_SSH_USER"), "-o", "%i %j %T")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+os.Getenv("GRIDSUB_SITEA_SLURM_CONF"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the site's squeue: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, d)
		}
		time.Sleep(time.Second)
	}
}

// TestSnakemakeDaemonRestart: the daemon killed (SIGKILL) mid-workflow and
// restarted; Snakemake's ids stay valid across the restart, and rerunning
// Snakemake finishes the workflow without rerunning a completed job.
func TestSnakemakeDaemonRestart(t *testing.T) {
	needEngine(t, "snakemake")
	for _, site := range engineSites {
		t.Run(site.name, func(t *testing.T) {
			e := newEngineEnv(t, site)
			e.writeFiles(map[string]string{"Snakefile": `rule all:
    input: expand("out/s{i}.txt", i=range(12))

rule step:
    output: "out/s{i}.txt"
    shell: "sleep 3; echo {wildcards.i} > {output}"
`})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := e.snakemake(ctx, "-j", "4", "--retries", "2")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			outputs := func() int {
				m, _ := filepath.Glob(filepath.Join(e.dir, "out", "s*.txt"))
				return len(m)
			}
			waitFor(t, 5*time.Minute, "4 outputs", func() bool { return outputs() >= 4 })
			e.killDaemon()
			killedAt := outputs()
			time.Sleep(2 * time.Second)
			e.startDaemon()
			err := cmd.Wait()
			t.Logf("the first run ended (%v); %d outputs when the daemon was killed, %d now", err, killedAt, outputs())
			first := e.accounting()
			for _, j := range first {
				if j.state == "PENDING" || j.state == "RUNNING" {
					t.Errorf("job %s still %s after the first run ended: the restart lost track of it", j.id, j.state)
				}
			}
			// Rerun: only what is missing runs.
			before := map[string]bool{}
			for i := 0; i < 12; i++ {
				if _, err := os.Stat(filepath.Join(e.dir, "out", fmt.Sprintf("s%d.txt", i))); err == nil {
					before[fmt.Sprint(i)] = true
				}
			}
			rerun, err := e.snakemake(ctx, "-j", "5").CombinedOutput()
			if err != nil {
				t.Fatalf("the rerun: %v\n%s\nfirst run:\n%s\ndaemon:\n%s", err, rerun, out.String(), e.log)
			}
			if outputs() != 12 {
				t.Fatalf("%d outputs after the rerun", outputs())
			}
			if len(before) == 12 && !strings.Contains(string(rerun), "Nothing to be done") {
				t.Errorf("the rerun ran jobs although every output was there:\n%s", rerun)
			}
			all := e.accounting()
			for _, m := range regexp.MustCompile(`output: out/s(\d+)\.txt`).FindAllStringSubmatch(string(rerun), -1) {
				if before[m[1]] {
					t.Errorf("the rerun ran step %s again, whose output the first run made", m[1])
				}
			}
			ran := strings.Count(string(rerun), "rule step:")
			if ran != 12-len(before) {
				t.Errorf("the rerun ran %d jobs; %d outputs were missing:\n%s", ran, 12-len(before), rerun)
			}
			if len(all)-len(first) != ran {
				t.Errorf("the rerun submitted %d jobs to gridsub for %d missing outputs", len(all)-len(first), ran)
			}
		})
	}
}

const toilWorkflow = `cwlVersion: v1.2
class: Workflow
inputs:
  message: string
outputs:
  result:
    type: File
    outputSource: count/out
steps:
  echo:
    run:
      class: CommandLineTool
      baseCommand: echo
      inputs:
        msg: {type: string, inputBinding: {position: 1}}
      outputs:
        out: {type: stdout}
      stdout: echo.txt
    in: {msg: message}
    out: [out]
  upper:
    run:
      class: CommandLineTool
      baseCommand: [tr, a-z, A-Z]
      stdin: $(inputs.src.path)
      inputs:
        src: File
      outputs:
        out: {type: stdout}
      stdout: upper.txt
    in: {src: echo/out}
    out: [out]
  count:
    run:
      class: CommandLineTool
      baseCommand: [wc, -c]
      stdin: $(inputs.src.path)
      inputs:
        src: File
      outputs:
        out: {type: stdout}
      stdout: count.txt
    in: {src: upper/out}
    out: [out]
`

// TestToilCWL: toil-cwl-runner --batchSystem slurm runs a three-step CWL
// workflow with the shims first on PATH, its jobs run by the daemon.
func TestToilCWL(t *testing.T) {
	needEngine(t, "toil-cwl-runner")
	for _, site := range engineSites {
		t.Run(site.name, func(t *testing.T) {
			e := newEngineEnv(t, site)
			e.writeFiles(map[string]string{"wf.cwl": toilWorkflow, "in.yml": "message: hello from toil via gridsub\n", "work/.keep": "", "out/.keep": ""})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			out, err := e.command(ctx, "toil-cwl-runner", "--batchSystem", "slurm", "--defaultMemory", "500Mi",
				"--jobStore", filepath.Join(e.dir, "js"), "--workDir", filepath.Join(e.dir, "work"),
				"--outdir", filepath.Join(e.dir, "out"), "wf.cwl", "in.yml").CombinedOutput()
			if err != nil {
				t.Fatalf("toil-cwl-runner: %v\n%s\ndaemon:\n%s", err, out, e.log)
			}
			got, _ := os.ReadFile(filepath.Join(e.dir, "out", "count.txt"))
			if strings.TrimSpace(string(got)) != "28" { // "HELLO FROM TOIL VIA GRIDSUB\n"
				t.Fatalf("count.txt = %q\n%s", got, out)
			}
			steps := 0
			for _, j := range e.accounting() {
				if strings.HasPrefix(j.name, "toil_job") {
					if j.state != "COMPLETED" {
						t.Errorf("toil job %+v", j)
					}
					steps++
				}
			}
			// Toil chains a step into its predecessor's job when it can:
			// the workflow's job and at least one step's.
			if steps < 2 {
				t.Fatalf("%d toil jobs went through gridsub", steps)
			}
		})
	}
}

// TestFrontEndsAskNoSite: the front-ends answer from the daemon's state
// alone. With the daemon's own cycle and health probe set an hour apart,
// a hundred squeue, sacct, scontrol, qstat and status --snakemake calls
// leave the SLURM controller's count of the site user's RPCs (sdiag)
// where it was.
func TestFrontEndsAskNoSite(t *testing.T) {
	needEngine(t)
	site := engineSites[0]
	if site.name != "slurm" {
		t.Skip("counts the SLURM controller's RPCs")
	}
	if _, err := exec.LookPath("sdiag"); err != nil {
		t.Skip("no sdiag")
	}
	e := newEngineEnv(t, site)
	cfg, _ := os.ReadFile(e.config)
	slow := strings.Replace(string(cfg), "interval: 1s\n", "interval: 1h\n  cron: {health: \"@every 1h\", reservation_binding: \"@every 1h\"}\n", 1)
	e.writeFiles(map[string]string{"site.yaml": slow})
	e.daemon.Process.Signal(syscall.SIGTERM)
	<-e.done
	e.startDaemon()
	for i := range 3 {
		e.frontEnd("sbatch", "-t", "10", "-J", fmt.Sprintf("quiet%d", i), "--wrap", "sleep 600")
	}
	// Each submission runs a cycle at once: the jobs reach the site.
	waitFor(t, 2*time.Minute, "3 jobs at the site", func() bool { return strings.Count(realSqueue(t), "\n") == 2 })
	time.Sleep(2 * time.Second)
	before := siteRPCs(t)
	for i := range 20 {
		e.frontEnd("squeue")
		e.frontEnd("squeue", "-h", "-t", "all", "-o", "%i %t %M")
		e.frontEnd("sacct", "-n", "-P", "-j", "1,2,3", "--format", "JobIDRaw,State,ExitCode")
		e.frontEnd("scontrol", "show", "job", fmt.Sprint(1+i%3))
		e.frontEnd("qstat", "-f")
		e.gridsub("status", "--snakemake", fmt.Sprint(1+i%3))
	}
	if after := siteRPCs(t); after != before {
		t.Fatalf("the site user's RPCs at the controller went from %d to %d during 120 front-end calls", before, after)
	}
	t.Logf("120 front-end calls, %d RPCs of the site user before and after", before)
	e.frontEnd("scancel", "1", "2", "3")
}

// siteRPCs is sdiag's count of the testbed user's RPCs at siteA's
// controller.
func siteRPCs(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sdiag")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+os.Getenv("GRIDSUB_SITEA_SLURM_CONF"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sdiag: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(os.Getenv("GRIDSUB_SSH_USER")) + `\s+\(\s*\d+\)\s+count:(\d+)`)
	m := re.FindStringSubmatch(string(out))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
