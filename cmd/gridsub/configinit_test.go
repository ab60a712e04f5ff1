package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/internal/config"
)

// config init writes a site configuration that loads, shows the
// ssh-keyscan command rather than running it, and never overwrites a file
// (nor writes through a link planted at its name).
func TestConfigInit(t *testing.T) {
	dir := t.TempDir()
	key, kh := filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "known_hosts")
	for _, f := range []string{key, kh} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "conf", "site.yaml")
	code, stdout, stderr := cli("config", "init", path, "--host", "login.hpc.example.org", "--port", "2222", "--user", "alice",
		"--key", key, "--known-hosts", kh, "--kind", "pbs", "--partition", "workq")
	if code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	for _, want := range []string{"site login (pbs) at alice@login.hpc.example.org:2222",
		"ssh-keyscan -p 2222 login.hpc.example.org >> " + kh, "ssh-keygen -lf " + kh, "nothing was run"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if b, _ := os.ReadFile(kh); len(b) != 0 {
		t.Errorf("known_hosts was written (%q): the scan must be shown, not run", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi, err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the written configuration does not load: %v", err)
	}
	s := cfg.Sites[0]
	if len(cfg.Sites) != 1 || s.Name != "login" || s.Kind != "pbs" || s.Partition != "workq" || s.SSH.Host != "login.hpc.example.org" ||
		s.SSH.Port != 2222 || s.SSH.User != "alice" || s.SSH.KeyFile != key || s.SSH.KnownHosts != kh || s.SSH.InsecureIgnoreHostKey {
		t.Fatalf("loaded %+v %+v", s, s.SSH)
	}
	before, _ := os.ReadFile(path)
	if code, _, stderr := cli("config", "init", path, "--host", "other.example.org", "--user", "bob"); code != exitUsage || !strings.Contains(stderr, "exists; not overwritten") {
		t.Fatalf("second init: exit %d %s", code, stderr)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("the file changed")
	}
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	link := filepath.Join(dir, "link.yaml")
	os.Symlink(victim, link)
	if code, _, _ := cli("config", "init", link, "--host", "h.example.org", "--user", "bob"); code != exitUsage {
		t.Fatalf("init through a link: exit %d", code)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatal("written through a planted link")
	}
	for _, bad := range [][]string{{"--user", "bob"}, {"--host", "a b", "--user", "bob"}, {"--host", "h;rm -rf", "--user", "bob"},
		{"--host", "h", "--user", "bob", "--kind", "lsf"}, {"--host", "h", "--user", "$(id)"}, {"--host", "h", "--user", "bob", "--remote-dir", "rel"}} {
		code, _, stderr := cli(append([]string{"config", "init", filepath.Join(dir, "bad.yaml")}, bad...)...)
		if code != exitUsage || !strings.Contains(stderr, "config init: --") {
			t.Errorf("%v: exit %d %s", bad, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.yaml")); err == nil {
		t.Error("a refused init wrote its file")
	}
}
