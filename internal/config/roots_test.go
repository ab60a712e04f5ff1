package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestRoots: broker.output_root defaults to $HOME/gridsub-out and
// broker.input_roots to [$HOME]; both can be set in the file, the output
// root also by GRIDSUB_BROKER_OUTPUT_ROOT; relative paths are refused.
func TestRoots(t *testing.T) {
	const sites = "sites: [{name: A, kind: sim, nodes: 1}]\n"
	c, err := Parse("t.yaml", []byte(sites), env(map[string]string{"HOME": "/home/u"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Broker.OutputRoot != "/home/u/gridsub-out" || !slices.Equal(c.Broker.InputRoots, []string{"/home/u"}) {
		t.Fatalf("defaults: output root %q, input roots %q", c.Broker.OutputRoot, c.Broker.InputRoots)
	}
	c, err = Parse("t.yaml", []byte(sites+"broker: {output_root: /srv/out, input_roots: [/data, /scratch]}\n"),
		env(map[string]string{"HOME": "/home/u"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Broker.OutputRoot != "/srv/out" || !slices.Equal(c.Broker.InputRoots, []string{"/data", "/scratch"}) {
		t.Fatalf("from the file: %q, %q", c.Broker.OutputRoot, c.Broker.InputRoots)
	}
	c, err = Parse("t.yaml", []byte(sites), env(map[string]string{"HOME": "/home/u", EnvName("broker.output_root"): "/env/out"}))
	if err != nil || c.Broker.OutputRoot != "/env/out" {
		t.Fatalf("from the environment: %v, %v", c, err)
	}
	_, err = Parse("t.yaml", []byte(sites+"broker: {output_root: out, input_roots: [/ok, data]}\n"), env(map[string]string{"HOME": "/home/u"}))
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 2 || errs[0].Field != "broker.output_root" || errs[1].Field != "broker.input_roots[1]" ||
		!strings.Contains(err.Error(), `must be an absolute directory, got "out"`) {
		t.Fatalf("relative roots: %v", err)
	}
}
