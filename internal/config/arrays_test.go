package config

import (
	"strings"
	"testing"
)

// TestNativeArraysOption: native arrays are on by default for a slurm site
// in process and off for an isolated one or a local site; native_arrays:
// false turns them off; native_arrays reaches a slurm site's backend and a
// pbs site's, and true is refused, naming the field, where nothing would
// honour it (a local site, an isolated or plugin backend).
func TestNativeArraysOption(t *testing.T) {
	yes, no := true, false
	c := parseBuiltin(t, "local-slurm.yaml", testbedEnv)
	if c.Sites[0].NativeArrays != nil {
		t.Fatalf("local-slurm.yaml sets native_arrays; the default is what this test checks")
	}
	if spec, err := c.BackendSpec(&c.Sites[0], nil); err != nil || !spec.Config.NativeArrays {
		t.Fatalf("native arrays are not the default of a slurm site: %+v %v", spec.Config, err)
	}
	c.Sites[0].NativeArrays = &no
	if spec, err := c.BackendSpec(&c.Sites[0], nil); err != nil || spec.Config.NativeArrays {
		t.Fatalf("native_arrays: false did not turn them off: %+v %v", spec.Config, err)
	}
	c.Sites[0].Isolate = true
	c.Sites[0].NativeArrays = nil
	if err := c.validate(); err != nil {
		t.Fatalf("an isolated slurm site without native_arrays: %v", err)
	}
	if spec, err := c.BackendSpec(&c.Sites[0], nil); err != nil || spec.Config.NativeArrays {
		t.Fatalf("an isolated site cannot submit native arrays, yet it was told to: %+v %v", spec.Config, err)
	}
	c.Sites[0].Isolate = false
	c.Sites[0].NativeArrays = &yes
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
	p.Sites[0].NativeArrays = &yes
	if err := p.validate(); err != nil {
		t.Fatalf("native_arrays on a pbs site: %v", err)
	}
	l := parseBuiltin(t, "local.yaml", testbedEnv)
	if spec, err := l.BackendSpec(&l.Sites[0], nil); err != nil || spec.Config.NativeArrays {
		t.Fatalf("a %s site was told native_arrays: %+v %v", l.Sites[0].Kind, spec.Config, err)
	}
	l.Sites[0].NativeArrays = &yes
	if err := l.validate(); err == nil || !strings.Contains(err.Error(), "native_arrays") {
		t.Fatalf("native_arrays on a %s site: %v, want an error naming native_arrays", l.Sites[0].Kind, err)
	}
}
