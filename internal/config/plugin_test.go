package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPluginSites(t *testing.T) {
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const slurm = "{name: R, kind: slurm, remote_dir: /scratch, ssh: {host: h, user: u, key_file: /k, known_hosts: /kh}%s}"
	ok := "sites:\n  - " + strings.Replace(slurm, "%s", ", isolate: true", 1) + "\n" +
		"  - {name: L, kind: local, nodes: 1, plugin: {path: /opt/p, sha256: \"" + sum + "\", args: [-v], options: {root: /x}, start_timeout: 3s}}\n"
	c, err := Parse("p.yaml", []byte(ok), env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Sites[0].Isolate || c.Sites[0].Plugin != nil {
		t.Errorf("site R: %+v", c.Sites[0])
	}
	p := c.Sites[1].Plugin
	if p == nil || p.Path != "/opt/p" || p.SHA256 != sum || len(p.Args) != 1 || p.Options["root"] != "/x" || p.StartTimeout != 3*time.Second {
		t.Errorf("site L plugin: %+v", p)
	}
	for _, tc := range []struct{ name, src, key, text string }{
		{"isolate sim", "sites: [{name: A, kind: sim, nodes: 1, isolate: true}]\n", "sites[0].isolate", "only a slurm, pbs or local"},
		{"plugin and isolate", "sites: [{name: L, kind: local, isolate: true, plugin: {path: /p, sha256: \"" + sum + "\"}}]\n", "sites[0].isolate", "already runs out of process"},
		{"no path", "sites: [{name: L, kind: local, plugin: {sha256: \"" + sum + "\"}}]\n", "sites[0].plugin.path", "missing"},
		{"no sum", "sites: [{name: L, kind: local, plugin: {path: /p}}]\n", "sites[0].plugin.sha256", "64 hex digits"},
		{"short sum", "sites: [{name: L, kind: local, plugin: {path: /p, sha256: abc}}]\n", "sites[0].plugin.sha256", "sha256sum /p"},
		{"sim plugin", "sites: [{name: L, kind: sim, nodes: 1, plugin: {path: /p, sha256: \"" + sum + "\"}}]\n", "sites[0].plugin", "simulated site cannot"},
		{"unknown plugin key", "sites: [{name: L, kind: local, plugin: {path: /p, sha: x}}]\n", "sites[0].plugin.sha", "unknown key"},
		{"kind without plugin", "sites: [{name: L, kind: workstation}]\n", "sites[0].kind", "must be one of"},
		{"local with ssh", "sites: [{name: L, kind: local, ssh: {host: h}}]\n", "sites[0].ssh", "runs its jobs on this machine"},
		{"local relative dir", "sites: [{name: L, kind: local, remote_dir: jobs}]\n", "sites[0].remote_dir", "clean absolute path"},
	} {
		_, err := Parse("p.yaml", []byte(tc.src), env(map[string]string{"HOME": "/h"}))
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), "p.yaml: "+tc.key+": ") || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %s: ...%s...", tc.name, err, tc.key, tc.text)
		}
	}
}

// TestPlannerPluginPolicy: broker.policy may name a planner plugin
// (plugin:/path ARGS with policy_sha256, plugin:builtin:NAME), with a
// fallback built-in and a call timeout; each mistake is named by its key.
func TestPlannerPluginPolicy(t *testing.T) {
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const site = "sites: [{name: A, kind: sim, nodes: 4}]\n"
	c, err := Parse("b.yaml", []byte(site+"broker: {policy: 'plugin:/opt/p -v x', policy_sha256: \""+sum+"\", fallback_policy: greedy, policy_timeout: 5s}\n"),
		env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Broker; b.Policy != "plugin:/opt/p -v x" || b.PolicySHA256 != sum || b.FallbackPolicy != "greedy" || b.PolicyTimeout != 5*time.Second {
		t.Errorf("broker %+v", b)
	}
	c, err = Parse("b.yaml", []byte(site+"broker: {policy: 'plugin:builtin:greedy-easy'}\n"), env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Broker; b.FallbackPolicy != "greedy-easy" || b.PolicyTimeout != 30*time.Second {
		t.Errorf("defaults: %+v", b)
	}
	for _, tc := range []struct{ name, broker, key, text string }{
		{"no sum", "{policy: 'plugin:/opt/p'}", "broker.policy_sha256", "sha256sum /opt/p"},
		{"short sum", "{policy: 'plugin:/opt/p', policy_sha256: abc}", "broker.policy_sha256", "64 hex digits"},
		{"relative path", "{policy: 'plugin:bin/p', policy_sha256: \"" + sum + "\"}", "broker.policy", "absolute path"},
		{"no path", "{policy: 'plugin: ', policy_sha256: \"" + sum + "\"}", "broker.policy", "absolute path"},
		{"builtin with sum", "{policy: 'plugin:builtin:greedy', policy_sha256: \"" + sum + "\"}", "broker.policy_sha256", "no checksum"},
		{"builtin without name", "{policy: 'plugin:builtin:'}", "broker.policy", "built-in planner's name"},
		{"sum for a built-in", "{policy: greedy, policy_sha256: \"" + sum + "\"}", "broker.policy_sha256", "only for a planner plugin"},
		{"plugin fallback", "{policy: 'plugin:builtin:greedy', fallback_policy: 'plugin:/x'}", "broker.fallback_policy", "built-in planner"},
		{"timeout", "{policy: 'plugin:builtin:greedy', policy_timeout: 0s}", "broker.policy_timeout", "from 1ns to 1h"},
		{"not a name", "{policy: 'greedy easy'}", "broker.policy", "or a planner plugin"},
	} {
		_, err := Parse("b.yaml", []byte(site+"broker: "+tc.broker+"\n"), env(map[string]string{"HOME": "/h"}))
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "b.yaml: "+tc.key+": ") || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %s: ...%s...", tc.name, err, tc.key, tc.text)
		}
	}
}
