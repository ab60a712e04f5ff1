package config

import (
	"strings"
	"testing"
)

// TestNativeArraysOption: native_arrays reaches a slurm site's backend and
// and a pbs site's, and is refused, naming the field, where nothing would
// honour it (a local site, an isolated or plugin backend).
func TestNativeArraysOption(t *testing.T) {
	c := parseBuiltin(t, "local-slurm.yaml", testbedEnv)
	c.Sites[0].NativeArrays = true
	if err := c.validate(); err != nil {
		t.Fatalf("native_arrays on a slurm site: %v", err)
	}
	spec, err := c.BackendSpec(&c.Sites[0], nil)
	if err != nil || !spec.Config.NativeArrays {
		t.Fatalf("the backend was not told native_arrays: %+v %v", spec.Config, err)
	}
	c.Sites[0].Isolate = true
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "native_arrays") {
		t.Fatalf("native_arrays with isolate: %v, want an error naming native_arrays", err)
	}
	p := parseBuiltin(t, "local-pbs.yaml", testbedEnv)
	p.Sites[0].NativeArrays = true
	if err := p.validate(); err != nil {
		t.Fatalf("native_arrays on a pbs site: %v", err)
	}
	l := parseBuiltin(t, "local.yaml", testbedEnv)
	l.Sites[0].NativeArrays = true
	if err := l.validate(); err == nil || !strings.Contains(err.Error(), "native_arrays") {
		t.Fatalf("native_arrays on a %s site: %v, want an error naming native_arrays", l.Sites[0].Kind, err)
	}
}
