package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRemapConfig(t *testing.T) {
	const base = "sites:\n  - {name: A, kind: sim, nodes: 4}\n  - {name: B, kind: sim, nodes: 2}\n"
	c, err := Parse("v.yaml", []byte(base), env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Broker.Remap != (Remap{}) {
		t.Fatalf("remap must be off by default, got %+v", c.Broker.Remap)
	}
	c, err = Parse("v.yaml", []byte(base+"broker: {remap: {enabled: true, min_gain: 15m, max_moves: 3, interval: 5m}}\n"), env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Remap{Enabled: true, MinGain: 15 * time.Minute, MaxMoves: 3, Interval: 5 * time.Minute}); c.Broker.Remap != want {
		t.Fatalf("remap = %+v, want %+v", c.Broker.Remap, want)
	}
	for _, tc := range []struct{ name, src, key, text string }{
		{"negative gain", "broker: {remap: {enabled: true, min_gain: -1m}}\n", "broker.remap.min_gain", "from 0 (the default 10m)"},
		{"moves", "broker: {remap: {enabled: true, max_moves: -1}}\n", "broker.remap.max_moves", "from 0 (the default 2) to 100, got -1"},
		{"too many moves", "broker: {remap: {enabled: true, max_moves: 1000}}\n", "broker.remap.max_moves", "got 1000"},
		{"interval", "broker: {remap: {enabled: true, interval: -5s}}\n", "broker.remap.interval", "from 0 (every scheduling cycle)"},
		{"set but off", "broker: {remap: {min_gain: 5m}}\n", "broker.remap.enabled", "would change nothing"},
		{"typo", "broker: {remap: {enabled: true, min_gian: 5m}}\n", "broker.remap.min_gian", "min_gain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("v.yaml", []byte(base+tc.src), env(map[string]string{"HOME": "/h"}))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.src)
			}
			var es Errors
			if !errors.As(err, &es) || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q: want key %s saying %q", err, tc.key, tc.text)
			}
		})
	}
}
