package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
)

func TestPolicyKeys(t *testing.T) {
	const base = "sites:\n  - {name: A, kind: sim, nodes: 4}\n"
	h := env(map[string]string{"HOME": "/h"})
	c, err := Parse("p.yaml", []byte(base), h)
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Broker; b.Feasibility != "capacity" || b.Admission != "drrm" || b.Trust != "paper002" || b.Tiering != "dgjs" || b.Remap.Policy != "" {
		t.Fatalf("defaults: %q %q %q %q %q", b.Feasibility, b.Admission, b.Trust, b.Tiering, b.Remap.Policy)
	}
	c, err = Parse("p.yaml", []byte(base+"broker: {admission: SRRM, remap: {enabled: true, policy: gain}}\n"), h)
	if err != nil {
		t.Fatal(err)
	}
	if c.Broker.Admission != "SRRM" || c.Broker.Remap.Policy != "gain" {
		t.Fatalf("set: %+v", c.Broker)
	}
	c, err = Parse("p.yaml", []byte(base), env(map[string]string{"HOME": "/h", "GRIDSUB_BROKER_ADMISSION": "srrm-random"}))
	if err != nil || c.Broker.Admission != "srrm-random" {
		t.Fatalf("environment: %v, %q", err, c.Broker.Admission)
	}
	for _, tc := range []struct{ name, src, key, text string }{
		{"feasibility", "broker: {feasibility: capacty}\n", "broker.feasibility", `(capacity), got "capacty"; did you mean "capacity"?`},
		{"admission", "broker: {admission: drm}\n", "broker.admission", `did you mean "drrm"?`},
		{"trust", "broker: {trust: paper02}\n", "broker.trust", `did you mean "paper002"?`},
		{"tiering", "broker: {tiering: nothing-like-it}\n", "broker.tiering", `built-in tiering policy (dgjs), got "nothing-like-it"`},
		{"remap", "broker: {remap: {enabled: true, policy: gian}}\n", "broker.remap.policy", `did you mean "gain"?`},
		{"remap off", "broker: {remap: {policy: gain}}\n", "broker.remap.enabled", "would change nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(base+tc.src), h)
			var es Errors
			if err == nil || !errors.As(err, &es) || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %v: want key %s saying %q", err, tc.key, tc.text)
			}
		})
	}
}

// TestPolicyPluginKeys: each of the six keys takes a built-in, a
// plugin:builtin: of its kind or a plugin:/path with its checksum in the
// sibling *_sha256 key, which Spec carries by kind; a plugin:/path
// without a checksum and a name of no built-in are refused naming the
// key and the valid built-ins.
func TestPolicyPluginKeys(t *testing.T) {
	const base = "sites:\n  - {name: A, kind: sim, nodes: 4}\n"
	h := env(map[string]string{"HOME": "/h"})
	sum := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		kind, builtin, other string
		set                  func(v string) string // a broker section with the key set to v
		sumKey               string
	}{
		{"feasibility", "capacity", "", func(v string) string { return "broker: {feasibility: '" + v + "'" }, "broker.feasibility_sha256"},
		{"admission", "srrm", "drrm", func(v string) string { return "broker: {admission: '" + v + "'" }, "broker.admission_sha256"},
		{"trust", "paper002", "", func(v string) string { return "broker: {trust: '" + v + "'" }, "broker.trust_sha256"},
		{"tiering", "dgjs", "", func(v string) string { return "broker: {tiering: '" + v + "'" }, "broker.tiering_sha256"},
		{"remap", "gain", "", func(v string) string { return "broker: {remap: {enabled: true, policy: '" + v + "'" }, "broker.remap.policy_sha256"},
		{"order", "fairshare", "fcfs", func(v string) string { return "broker: {order: '" + v + "'" }, "broker.order_sha256"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			key := strings.TrimSuffix(tc.sumKey, "_sha256")
			sumField := tc.sumKey[strings.LastIndexByte(tc.sumKey, '.')+1:]
			closing := "}\n"
			if tc.kind == "remap" {
				closing = "}}\n"
			}
			parse := func(v, extra string) (*Config, error) {
				return Parse("p.yaml", []byte(base+tc.set(v)+extra+closing), h)
			}
			for _, ok := range []string{tc.builtin, "plugin:builtin:" + tc.builtin} {
				if _, err := parse(ok, ""); err != nil {
					t.Errorf("%s: %v", ok, err)
				}
			}
			c, err := parse("plugin:/opt/p -v", ", "+sumField+": \""+sum+"\"")
			if err != nil {
				t.Fatalf("plugin:/opt/p with its sum: %v", err)
			}
			spec, err := c.Spec(nil)
			if err != nil {
				t.Fatal(err)
			}
			if spec.PolicySHA256[tc.kind] != sum || len(spec.PolicySHA256) != 1 {
				t.Errorf("spec checksums %v", spec.PolicySHA256)
			}
			for _, bad := range []struct{ v, extra, key, text string }{
				{"plugin:/opt/p", "", tc.sumKey, sumField + `: "..."; sha256sum /opt/p), got ""`},
				{"plugin:/opt/p", ", " + sumField + ": \"abc\"", tc.sumKey, "64 hex digits"},
				{"plugin:opt/p", ", " + sumField + ": \"" + sum + "\"", key, "absolute path"},
				{tc.builtin, ", " + sumField + ": \"" + sum + "\"", tc.sumKey, "remove it"},
				{"plugin:builtin:" + tc.builtin, ", " + sumField + ": \"" + sum + "\"", tc.sumKey, "no checksum"},
				{"nope-x", "", key, "(" + strings.Join(registry.NamesOf(policy.Kind(tc.kind)), ", ") + `), got "nope-x"`},
				{"plugin:builtin:nope-x", "", key, "(" + strings.Join(registry.NamesOf(policy.Kind(tc.kind)), ", ") + `), got "nope-x"`},
				{"plugin:builtin:", "", key, "plugin:builtin: must be followed by a built-in " + tc.kind + " policy's name"},
			} {
				_, err := parse(bad.v, bad.extra)
				if err == nil || !strings.Contains(err.Error(), bad.key+":") || !strings.Contains(err.Error(), bad.text) {
					t.Errorf("%s%s: %v: want %s saying %q", bad.v, bad.extra, err, bad.key, bad.text)
				}
			}
		})
	}
}
