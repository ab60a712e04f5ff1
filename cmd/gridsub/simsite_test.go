package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/internal/config"
	"github.com/gridsub/gridsub/simbackend/sshsite"
)

// simGrid serves one simulated site per dialect given (SLURM and PBS
// alternating, nodes each, 2 cores) for the test binary (TestMain answers
// their batch commands) and writes a config reaching them through the
// ordinary slurm and pbs backends.
func simGrid(t *testing.T, nodes []int, dialects []string, policy string) (cfg string, sites []*sshsite.Site) {
	t.Helper()
	d, err := os.MkdirTemp("", "gss")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	key, err := sshsite.NewClientKey(filepath.Join(d, "id"))
	if err != nil {
		t.Fatal(err)
	}
	// The sites' bin/ commands run the built gridsub (simsite cmd), not
	// this test binary: under -race each command's start would take the
	// race runtime's, and a batch of sbatch/qsub calls at the sites then
	// ran for longer than the broker's batch bound.
	exe := buildBinary(t)
	var b strings.Builder
	b.WriteString("sites:\n")
	var known []string
	for i, n := range nodes {
		name := fmt.Sprintf("%s%d", dialects[i], i)
		s, err := sshsite.Start(context.Background(), sshsite.Config{Name: name, Dialect: dialects[i], Nodes: n, Cores: 2,
			Dir: filepath.Join(d, name), User: "griduser", AuthorizedKeys: []ssh.PublicKey{key.Public}, Exe: exe,
			ExeArgs: []string{"simsite", "cmd"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		sites = append(sites, s)
		known = append(known, s.KnownHosts())
		host, port, _ := strings.Cut(s.Addr(), ":")
		fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n    nodes: %d\n    cores_per_node: 2\n    h: 1.0\n    remote_dir: %s\n", name, dialects[i], n, filepath.Join(s.Home(), "gridsub"))
		if dialects[i] == sshsite.PBS {
			fmt.Fprintf(&b, "    bin_dir: %s\n", s.Bin())
		}
		fmt.Fprintf(&b, "    ssh:\n      host: %s\n      port: %s\n      user: griduser\n      key_file: %s\n      known_hosts: %s\n",
			host, port, key.File, filepath.Join(d, "known_hosts"))
	}
	fmt.Fprintf(&b, "broker:\n  policy: %s\n  interval: 1s\n  poll_interval: 500ms\n  state_dir: %s\n  output_root: %s\n",
		policy, filepath.Join(d, "state"), filepath.Join(d, "out"))
	if err := os.WriteFile(filepath.Join(d, "known_hosts"), []byte(strings.Join(known, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(d, "grid.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, sites
}

// TestSimsiteCoallocSpansPBSAndSLURM: a 6-node job on a grid of a 4-node
// SLURM-dialect and a 4-node PBS-dialect site served over SSH is
// co-allocated across both; each site runs its component once, as a real
// process, and both components' outputs come back.
func TestSimsiteCoallocSpansPBSAndSLURM(t *testing.T) {
	cfg, sites := simGrid(t, []int{4, 4}, []string{sshsite.SLURM, sshsite.PBS}, "optimal-easy")
	dir := t.TempDir()
	job := filepath.Join(dir, "wide.yaml")
	os.WriteFile(job, []byte("name: span\nscript: |\n  echo \"part on ${SLURM_JOB_NODELIST:-$PBS_JOBID}\"\nresources:\n  nodes: 6\n  walltime: 5m\n"), 0o644)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := cli("--config", cfg, "--output", "json", "--out-dir", out, job)
	if code != 0 {
		t.Fatalf("gridsub exited %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, s := range sites {
		ex := s.Executions()
		if len(ex) != 1 {
			t.Errorf("site %s ran %v, want one component once", s.Config().Name, ex)
		}
		for g, n := range ex {
			if n != 1 {
				t.Errorf("site %s ran %s %d times", s.Config().Name, g, n)
			}
		}
	}
	var got []string
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && filepath.Base(p) == "gridsub.out" {
			b, _ := os.ReadFile(p)
			got = append(got, strings.TrimSpace(string(b)))
		}
		return nil
	})
	if len(got) != 2 || !strings.Contains(strings.Join(got, ";"), "slurm0-n") || !strings.Contains(strings.Join(got, ";"), ".pbs1") {
		t.Errorf("fetched outputs %q, want one from each site (a SLURM node list and a PBS job id)", got)
	}
}

// TestSimsiteServeCLI: `gridsub simsite serve` prints its address, its
// known_hosts line and "ready"; the pbs backend reaches it with exactly
// that host key; SIGTERM stops it cleanly and closes the port.
func TestSimsiteServeCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub")
	}
	bin := buildBinary(t)
	d := t.TempDir()
	key, err := sshsite.NewClientKey(filepath.Join(d, "id"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "simsite", "serve", "--dialect", "pbs", "--name", "clipbs", "--nodes", "3", "--cores", "2",
		"--dir", filepath.Join(d, "site"), "--authorized-keys", key.File+".pub", "--user", "griduser")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	var addr, known string
	for sc.Scan() {
		l := sc.Text()
		if i := strings.Index(l, " addr="); i >= 0 {
			addr, _, _ = strings.Cut(l[i+len(" addr="):], " ")
		}
		if k, ok := strings.CutPrefix(l, "known_hosts: "); ok {
			known = k
		}
		if l == "ready" {
			break
		}
	}
	if addr == "" || known == "" {
		t.Fatalf("no address or known_hosts line before ready; stderr: %s", stderr.String())
	}
	kh := filepath.Join(d, "known_hosts")
	os.WriteFile(kh, []byte(known+"\n"), 0o644)
	if b, _ := os.ReadFile(filepath.Join(d, "site", "known_hosts")); strings.TrimSpace(string(b)) != known {
		t.Errorf("DIR/known_hosts %q, printed %q", b, known)
	}
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	b, err := pbs.Connect(context.Background(), pbs.Config{Name: "clipbs", RemoteDir: filepath.Join(d, "site", "home", "g"),
		BinDir: filepath.Join(d, "site", "bin")}, transport.Config{Host: host, Port: p, User: "griduser", KeyFiles: []string{key.File}, KnownHosts: []string{kh}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.Info(context.Background())
	b.Close()
	if err != nil || info.Nodes != 3 || info.CoresPerNode != 2 || info.Kind != "pbs" {
		t.Fatalf("Info = %+v, %v; want 3 PBS nodes of 2 cores", info, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("simsite serve did not stop within 10 s of SIGTERM")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the port still accepts connections after SIGTERM")
	}
}

// TestGrid50 holds configs/grid50.yaml to what its comment says (50 sites,
// both dialects, 4-512 nodes, varied h) and serves it: examples/hello.yaml
// runs on a PBS-dialect site and examples/wide.yaml, kept to three
// SLURM-dialect sites, is co-allocated over them; with GRIDSUB_LONG=1 also
// wide as it is (a PBS site) and hello kept to a SLURM site.
func TestGrid50(t *testing.T) {
	dir, err := os.MkdirTemp("", "g50")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("GRIDSUB_GRID50_DIR", dir)
	cfgPath := filepath.Join("..", "..", "configs", "grid50.yaml")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	kinds, hs, ports := map[string]int{}, map[float64]bool{}, map[int]bool{}
	lo, hi := 1<<30, 0
	for _, s := range cfg.Sites {
		kinds[s.Kind]++
		hs[s.H] = true
		ports[s.SSH.Port] = true
		lo, hi = min(lo, s.Nodes), max(hi, s.Nodes)
	}
	if len(cfg.Sites) != 50 || kinds["slurm"] != 25 || kinds["pbs"] != 25 || lo != 4 || hi != 512 || len(hs) < 4 || len(ports) != 50 {
		t.Fatalf("grid50: %d sites, kinds %v, nodes %d..%d, %d h values, %d ports", len(cfg.Sites), kinds, lo, hi, len(hs), len(ports))
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Sites[0].SSH.Port)), 200*time.Millisecond); err == nil {
		c.Close()
		t.Skipf("port %d is in use (is scripts/grid50.sh running?): not serving the grid here", cfg.Sites[0].SSH.Port)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	g := &globals{config: cfgPath, stdout: &out, stderr: io.Discard, logLevel: "error"}
	done := make(chan error, 1)
	go func() { done <- simsiteUp(ctx, g, &simsiteFlags{dir: dir, scale: 1, minJobAge: 5 * time.Minute}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("simsite up: %v", err)
		}
	}()
	for !strings.Contains(out.String(), "ready 50 sites") {
		select {
		case err := <-done:
			done <- nil // for the deferred wait: simsite up has ended
			t.Fatalf("simsite up ended: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	slurmOnly := func(src, sites string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", src))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "slurm-"+src)
		y := string(b)
		if strings.Contains(y, "\nscheduling:\n") {
			y = strings.Replace(y, "\nscheduling:\n", "\nscheduling:\n  sites: ["+sites+"]\n", 1)
		} else {
			y = strings.Replace(y, "\nresources:", "\nscheduling:\n  sites: ["+sites+"]\nresources:", 1)
		}
		os.WriteFile(p, []byte(y), 0o644)
		return p
	}
	runs := []struct{ job, want string }{
		{filepath.Join("..", "..", "examples", "hello.yaml"), "pbs"},
		{slurmOnly("wide.yaml", "g03slurm, g09slurm, g11slurm"), "g03slurm:8,g09slurm:32,g11slurm:8"},
	}
	if os.Getenv("GRIDSUB_LONG") == "1" {
		runs = append(runs, struct{ job, want string }{filepath.Join("..", "..", "examples", "wide.yaml"), "pbs"},
			struct{ job, want string }{slurmOnly("hello.yaml", "g01slurm"), "g01slurm:1"})
	}
	for _, c := range runs {
		t0 := time.Now()
		code, stdout, stderr := cli("--config", cfgPath, "--out-dir", filepath.Join(dir, "out"), c.job)
		t.Logf("%s: %s", filepath.Base(c.job), time.Since(t0).Round(time.Millisecond))
		ok := code == 0 && strings.Contains(stdout, "completed (exit 0)")
		for _, w := range strings.Split(c.want, ",") {
			ok = ok && strings.Contains(stdout, w)
		}
		if !ok {
			t.Errorf("%s: exit %d\n%s\n%s", c.job, code, stdout, stderr)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
