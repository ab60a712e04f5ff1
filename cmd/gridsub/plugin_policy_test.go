package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
)

// TestPluginsListsPolicyKinds: `gridsub plugins --builtins` lists the six
// policy kinds in order with their built-ins, as a table and as JSON.
func TestPluginsListsPolicyKinds(t *testing.T) {
	code, out, errs := cli("plugins", "--builtins", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var rows []kindListing
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var kinds []string
	for _, r := range rows {
		kinds = append(kinds, r.Kind)
	}
	if strings.Join(kinds, " ") != strings.Join(plugins.PolicyKinds(), " ") || len(kinds) != 6 {
		t.Errorf("kinds %v, want %v", kinds, plugins.PolicyKinds())
	}
	code, out, _ = cli("plugins", "--builtins")
	for _, want := range []string{"placement", "greedy-easy", "feasibility", "capacity", "admission", "drrm", "trust", "paper002", "tiering", "remap", "gridsub plugin serve trust NAME"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("table (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
}

// TestServeEveryPolicyBuiltin: every built-in of every policy kind runs
// out of process as `gridsub plugin serve KIND NAME`, checksummed, and
// answers with its name.
func TestServeEveryPolicyBuiltin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and starts a plugin per built-in")
	}
	bin := buildBinary(t)
	sum := fileSHA256Hex(t, bin)
	ctx := context.Background()
	n := 0
	for _, k := range policyKinds() {
		for _, name := range k.names() {
			n++
			if k.kind == plugins.KindPlacement {
				p, err := plannerrpc.Load(ctx, plannerrpc.Config{Path: bin, Args: []string{"plugin", "serve", "placement", name}, SHA256: sum})
				if err != nil {
					t.Fatalf("placement %s: %v", name, err)
				}
				if got := p.Planner().Name(); got == "" {
					t.Errorf("placement %s: no name", name)
				}
				p.Close()
				continue
			}
			p, err := policyrpc.Load(ctx, k.kind, policyrpc.Config{Path: bin, Args: []string{"plugin", "serve", k.kind, name}, SHA256: sum})
			if err != nil {
				t.Fatalf("%s %s: %v", k.kind, name, err)
			}
			if got := p.Policy().(interface{ Name() string }).Name(); got != name || p.Pid() <= 0 {
				t.Errorf("%s %s: named %q, pid %d", k.kind, name, got, p.Pid())
			}
			p.Close()
		}
	}
	if n < 20 {
		t.Errorf("only %d built-ins", n)
	}
	code, _, errs := cli("plugin", "serve", "trust", "nope")
	if code != exitUsage || !strings.Contains(errs, "paper002") {
		t.Errorf("an unknown built-in: exit %d\n%s", code, errs)
	}
}
