package config

import (
	"errors"
	"strings"
	"testing"
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
