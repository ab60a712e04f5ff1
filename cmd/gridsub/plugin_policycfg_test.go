package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
)

// policyPluginConfig writes a configuration of two simulated sites whose
// trust policy is the external betatrust plugin (examples/plugins/betatrust,
// named by path and checksum) and whose admission policy is the built-in
// srrm run out of process (plugin:builtin:srrm); the trust task runs every
// second.
func policyPluginConfig(t *testing.T, trustBin, trustSum string) string {
	t.Helper()
	cfg := `sites:
  - {name: A, kind: sim, nodes: 4}
  - {name: B, kind: sim, nodes: 8}
broker:
  trust: 'plugin:` + trustBin + `'
  trust_sha256: "` + trustSum + `"
  admission: 'plugin:builtin:srrm'
  cron: {trust: "@every 1s"}
`
	p := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildBetatrust builds the external trust plugin example.
func buildBetatrust(t *testing.T) (string, string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gridsub-betatrust")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/gridsub/gridsub/examples/plugins/betatrust/cmd/gridsub-betatrust").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return bin, fileSHA256Hex(t, bin)
}

// checkPolicyRows checks the policy plugins' rows of `gridsub plugins`:
// admission isolated (srrm), trust external (the betatrust executable,
// its checksum), both with a process and healthy.
func checkPolicyRows(t *testing.T, rows []plugins.Listing, trustBin, trustSum string) (admission, trust plugins.Listing) {
	t.Helper()
	byKind := map[string]plugins.Listing{}
	for _, r := range rows {
		byKind[r.Kind] = r
	}
	admission, trust = byKind[plugins.KindAdmission], byKind[plugins.KindTrust]
	if admission.Mode != plugins.ModeIsolated || admission.Impl != "srrm" || admission.Pid <= 0 || admission.Health != "ok" || admission.Fallback != "drrm" {
		t.Errorf("admission row %+v (all %+v)", admission, rows)
	}
	if trust.Mode != plugins.ModeExternal || trust.Impl != trustBin || trust.SHA256 != trustSum || trust.Version == "" || trust.Pid <= 0 || trust.Health != "ok" {
		t.Errorf("trust row %+v (all %+v)", trust, rows)
	}
	return admission, trust
}

// TestPluginsListsPolicyPlugins: a configuration naming an external
// trust plugin (with broker.trust_sha256) and plugin:builtin:srrm for
// admission loads both out of process; `gridsub plugins --embedded` lists
// them (JSON and table) and its POLICY KIND table says what was chosen for
// each kind; a wrong checksum refuses to start.
func TestPluginsListsPolicyPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and a plugin")
	}
	bin := buildBinary(t)
	tb, ts := buildBetatrust(t)
	cfg := policyPluginConfig(t, tb, ts)
	out, err := exec.Command(bin, "--config", cfg, "plugins", "--embedded", "--output", "json").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rows []plugins.Listing
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 4 {
		t.Errorf("rows %+v", rows)
	}
	checkPolicyRows(t, rows, tb, ts)

	out, err = exec.Command(bin, "--config", cfg, "plugins", "--embedded").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"CONFIGURED", "external", tb, ts[:12], "plugin:builtin:srrm", "plugin:" + tb, "trust: falls back to the built-in paper002"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}

	wrong := policyPluginConfig(t, tb, strings.Repeat("0", 64))
	out, err = exec.Command(bin, "--config", wrong, "plugins", "--embedded").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "checksum") || !strings.Contains(string(out), "broker.trust_sha256 (sha256sum "+tb+")") {
		t.Errorf("a wrong trust_sha256: %v\n%s", err, out)
	}
}

// TestDaemonTrustThroughPolicyPlugin: the daemon runs the configured
// trust plugin and its trust task scores through it: the plugin's process,
// killed, is started again by the next recomputation. `gridsub plugins`
// lists the daemon's policy plugins and its choices.
func TestDaemonTrustThroughPolicyPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and a plugin and starts a daemon")
	}
	bin := buildBinary(t)
	tb, ts := buildBetatrust(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	p := startServe(t, bin, filepath.Join(dir, "state"), sock, "--config", policyPluginConfig(t, tb, ts), "--log-level", "debug") // "trust recomputed" is DEBUG while trust stands still
	defer p.term(t, sock)
	t.Setenv(envSocket, sock)
	list := func() []plugins.Listing {
		t.Helper()
		code, out, errs := cli("plugins", "--output", "json")
		if code != 0 {
			t.Fatalf("gridsub plugins: exit %d\n%s", code, errs)
		}
		var rows []plugins.Listing
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return rows
	}
	_, trust := checkPolicyRows(t, list(), tb, ts)
	recomputed := func() int { return strings.Count(p.logs.String(), `"msg":"trust recomputed"`) }
	before := recomputed()
	if err := syscall.Kill(trust.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, now := checkPolicyRowsQuiet(list())
		if now.Restarts >= 1 && now.Pid > 0 && now.Pid != trust.Pid && now.Health == "ok" && recomputed() > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trust plugin was not restarted by the trust task: %+v\n%s", now, p.logs)
		}
	}
	if strings.Contains(p.logs.String(), "trust recomputation failed") {
		t.Errorf("daemon log:\n%s", p.logs)
	}
	code, out, errs := cli("plugins")
	if code != 0 || !strings.Contains(out, "CONFIGURED") || !strings.Contains(out, "plugin:builtin:srrm") || !strings.Contains(out, "plugin:"+tb) {
		t.Errorf("table (exit %d):\n%s\n%s", code, out, errs)
	}
}

// checkPolicyRowsQuiet picks the admission and trust rows.
func checkPolicyRowsQuiet(rows []plugins.Listing) (admission, trust plugins.Listing) {
	for _, r := range rows {
		switch r.Kind {
		case plugins.KindAdmission:
			admission = r
		case plugins.KindTrust:
			trust = r
		}
	}
	return admission, trust
}
