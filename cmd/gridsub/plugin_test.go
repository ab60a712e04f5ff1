package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge/plugins"
)

// pluginConfig writes a configuration with one site served by an external
// plugin: the gridsub binary itself serving its sim backend, named by path
// and checksum like any third-party plugin.
func pluginConfig(t *testing.T, bin, sum string) string {
	t.Helper()
	cfg := `sites:
  - name: proc
    kind: simproc
    nodes: 4
    cores_per_node: 1
    h: 1.0
    plugin:
      path: ` + bin + `
      sha256: "` + sum + `"
      args: [plugin, serve, backend, sim]
      options: {note: "free-form"}
network:
  default: {bandwidth: 1MB/s, latency: 10ms}
`
	p := filepath.Join(t.TempDir(), "plugin.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileSHA256Hex(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestPluginsListsExternalPlugin: `gridsub plugins` loads a configured
// external plugin (checksum verified) and lists it; a wrong checksum is a
// clear error naming the site and what to do; a malformed one is a
// configuration error naming the key.
func TestPluginsListsExternalPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub")
	}
	bin := buildBinary(t)
	sum := fileSHA256Hex(t, bin)
	code, out, errs := cli("--config", pluginConfig(t, bin, sum), "plugins", "--embedded", "--output", "json")
	if code != 0 {
		t.Fatalf("gridsub plugins: exit %d\n%s", code, errs)
	}
	var rows []plugins.Listing
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	if r.Name != "proc" || r.Kind != "backend" || r.Mode != "external" || r.Impl != bin || r.SHA256 != sum || r.Pid <= 0 || r.Health != "ok" {
		t.Errorf("listing %+v", r)
	}
	code, out, _ = cli("--config", pluginConfig(t, bin, sum), "plugins", "--embedded")
	if code != 0 || !strings.Contains(out, "external") || !strings.Contains(out, sum[:12]) {
		t.Errorf("table (exit %d):\n%s", code, out)
	}

	wrong := strings.Repeat("0", 64)
	code, _, errs = cli("--config", pluginConfig(t, bin, wrong), "plugins", "--embedded")
	if code != exitInternal || !strings.Contains(errs, "plugin proc") || !strings.Contains(errs, "checksum mismatch") ||
		!strings.Contains(errs, sum) || !strings.Contains(errs, "plugin.sha256") {
		t.Errorf("wrong checksum: exit %d\n%s", code, errs)
	}
	code, _, errs = cli("--config", pluginConfig(t, bin, "not-hex"), "plugins", "--embedded")
	if code != exitUsage || !strings.Contains(errs, "sites[0].plugin.sha256") {
		t.Errorf("malformed checksum: exit %d\n%s", code, errs)
	}
}

// TestPluginsFromDaemon: with a daemon running, `gridsub plugins` lists
// what the daemon loaded (GET /v1/plugins).
func TestPluginsFromDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and starts a daemon")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	p := startServe(t, bin, filepath.Join(dir, "state"), sock, "--config", pluginConfig(t, bin, fileSHA256Hex(t, bin)))
	defer p.term(t, sock)
	t.Setenv(envSocket, sock)
	code, out, errs := cli("plugins", "--output", "json")
	if code != 0 {
		t.Fatalf("gridsub plugins: exit %d\n%s", code, errs)
	}
	var rows []plugins.Listing
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("%v\n%s", err, out)
	}
	if r := rows[0]; r.Name != "proc" || r.Mode != "external" || r.Pid <= 0 || r.Health != "ok" {
		t.Errorf("from the daemon: %+v", r)
	}
}
