package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends/transport/sshdtest"
	"github.com/gridsub/gridsub/internal/config"
)

// config init --host ALIAS asks ssh -G what the alias means, writes what
// it resolved (the flags given win) with ssh_config kept for the jump
// hosts, and the file it writes reaches the SLURM testbed's login node
// through two bastions (gridsub doctor passes every step). A setting
// gridsub cannot honour is refused by name.
func TestConfigInitAlias(t *testing.T) {
	needSlurm(t)
	ch := sshdtest.NewChain(t)
	scratch := os.Getenv("GRIDSUB_SITEA_SCRATCH")
	path := filepath.Join(t.TempDir(), "site.yaml")
	code, stdout, stderr := cli("config", "init", path, "--host", "cluster", "--ssh-config", ch.SSHConfig, "--remote-dir", scratch, "--name", "siteA")
	if code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	for _, want := range []string{"resolved by ssh -G", "HostName 127.0.0.1", "ProxyJump bastion1,bastion2", "doctor siteA"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the written configuration does not load: %v", err)
	}
	x := cfg.Sites[0].SSH
	if x.Host != "cluster" || x.Port != atoi(os.Getenv("GRIDSUB_SITEA_SSH_PORT")) || x.User != os.Getenv("GRIDSUB_SSH_USER") ||
		x.KeyFile != os.Getenv("GRIDSUB_SSH_KEY") || x.KnownHosts != ch.KnownHosts || x.SSHConfig != ch.SSHConfig {
		t.Fatalf("loaded %+v", *x)
	}
	code, d, raw := doctor(t, path)
	if code != 0 || !d.OK {
		t.Fatalf("doctor on the written file: exit %d\n%s", code, raw)
	}
	// A job runs through the two jump hosts, the broker in process.
	job := filepath.Join(t.TempDir(), "job.yaml")
	os.WriteFile(job, []byte("name: chain\ncommand: [/bin/sh, -c, 'echo through-two-jump-hosts > out.txt']\nresources: {nodes: 1, walltime: 5m}\noutputs: [out.txt]\n"), 0o644)
	out := t.TempDir()
	code, stdout, stderr = cli("--config", path, job, "--out-dir", out, "-o", "json")
	var r runJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 0 || r.State != "completed" || len(r.Outputs) == 0 {
		t.Fatalf("a job through the chain: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	found := false
	for _, o := range r.Outputs {
		if b, _ := os.ReadFile(o); strings.HasSuffix(o, "out.txt") && strings.TrimSpace(string(b)) == "through-two-jump-hosts" {
			found = true
		}
	}
	if !found {
		t.Errorf("no out.txt with the job's line among its outputs %v", r.Outputs)
	}

	bad := filepath.Join(t.TempDir(), "ssh_config")
	os.WriteFile(bad, []byte("Host viaproxy\n  HostName 10.1.2.3\n  ProxyCommand nc %h %p\n"), 0o600)
	code, _, stderr = cli("config", "init", filepath.Join(t.TempDir(), "x.yaml"), "--host", "viaproxy", "--ssh-config", bad)
	if code != exitUsage || !strings.Contains(stderr, "ProxyCommand") {
		t.Errorf("a ProxyCommand alias: exit %d %s", code, stderr)
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
