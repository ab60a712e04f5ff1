package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/policy/trust"
	"github.com/gridsub/gridsub/simbackend/replay"
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
	if strings.Join(kinds, " ") != strings.Join(plugins.ExtensionPoints(), " ") || len(kinds) != 7 {
		t.Errorf("kinds %v, want %v", kinds, plugins.ExtensionPoints())
	}
	code, out, _ = cli("plugins", "--builtins")
	for _, want := range []string{"placement", "greedy-easy", "feasibility", "capacity", "admission", "drrm", "trust", "paper002", "tiering", "remap", "order", "fairshare", "gridsub plugin serve order NAME"} {
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

// TestReplayTrustBuiltinOutOfProcess: a trace replay whose sites' trust is
// learned by the built-in paper002 gives the same records, byte for byte,
// with the built-in in process and isolated (`gridsub plugin serve trust
// paper002`, checksummed).
func TestReplayTrustBuiltinOutOfProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub and replays twice")
	}
	bin := buildBinary(t)
	p, err := policyrpc.Load(context.Background(), plugins.KindTrust, policyrpc.Config{Path: bin,
		Args: []string{"plugin", "serve", "trust", "paper002"}, SHA256: fileSHA256Hex(t, bin)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	local, err := registry.Trust("paper002")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 28))
	var jobs []replay.Job
	at := time.Duration(0)
	for i := range 400 {
		at += time.Duration(r.IntN(300)) * time.Second
		est := time.Duration(60+r.IntN(3*3600)) * time.Second
		run := est / 2
		if r.IntN(5) == 0 {
			run = est + time.Minute
		}
		jobs = append(jobs, replay.Job{ID: fmt.Sprint(i), Submit: at, Width: 1 + r.IntN(16), Estimate: est, Runtime: run, Origin: -1})
	}
	setup := replay.Setup{Sites: []replay.Site{{Name: "A", Nodes: 48, H: 1}, {Name: "B", Nodes: 32, H: 0.7}, {Name: "C", Nodes: 24, H: 1.4}},
		MultiSite: 1.1, Planner: &trust.Planner{}, TrustHalfLife: 12 * time.Hour}
	var out [2]string
	for i, tp := range []policy.Trust{local, p.Policy().(policy.Trust)} {
		setup.Trust = tp
		res, err := replay.Run(context.Background(), setup, jobs, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.Records)
		out[i] = string(b)
	}
	if out[0] != out[1] {
		t.Fatal("the replay's records differ with paper002 out of process")
	}
}
