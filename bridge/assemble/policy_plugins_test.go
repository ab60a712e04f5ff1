package assemble

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
)

// TestPolicyNamesOpenPlugins: PolicyNames.Open gives the built-ins in
// process for plain names and a checksummed plugin process for a plugin:
// reference; a bad name is a configuration error.
func TestPolicyNamesOpenPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a plugin")
	}
	bin := filepath.Join(t.TempDir(), "testpolicy")
	if out, err := exec.Command("go", "build", "-o", bin, "../plugins/policyrpc/internal/testpolicy").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, _ := os.ReadFile(bin)
	sum := sha256.Sum256(b)
	n := PolicyNames{Admission: "srrm", Trust: "plugin:" + bin + " trust paper002"}
	p, c, err := n.Open(context.Background(), PolicyPlugins{SHA256: map[string]string{plugins.KindTrust: hex.EncodeToString(sum[:])}, Fallback: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p.Admission.Name() != "srrm" || p.Feasibility == nil || p.Tiering == nil || p.Remap == nil {
		t.Errorf("built-ins: %+v", p)
	}
	h, ok := p.Trust.(interface{ Plugin() *policyrpc.Plugin })
	if !ok || p.Trust.Name() != "paper002" || h.Plugin().Pid() <= 0 {
		t.Errorf("trust: a %T named %q", p.Trust, p.Trust.Name())
	}
	if ls := c.(*PolicyPluginSet).Listings(); len(ls) != 1 || ls[0].Kind != "trust" || ls[0].Mode != plugins.ModeExternal || ls[0].Pid <= 0 || ls[0].Fallback != "paper002" {
		t.Errorf("listings %+v", ls)
	}
	if _, _, err := (PolicyNames{Remap: "nope"}).Open(context.Background(), PolicyPlugins{}); !errors.Is(err, ErrConfig) {
		t.Errorf("a bad name: %v", err)
	}
	if _, _, err := (PolicyNames{Trust: "plugin:" + bin + " trust paper002"}).Open(context.Background(),
		PolicyPlugins{SHA256: map[string]string{plugins.KindTrust: hex.EncodeToString(make([]byte, 32))}}); !errors.Is(err, plugins.ErrChecksum) {
		t.Errorf("a wrong checksum: %v", err)
	}
	if _, _, err := (PolicyNames{Trust: "plugin:" + bin + " trust paper002"}).Open(context.Background(), PolicyPlugins{}); !errors.Is(err, ErrConfig) ||
		!errors.Is(err, plugins.ErrBadRef) || !strings.Contains(err.Error(), "broker.trust_sha256") {
		t.Errorf("no checksum: %v", err)
	}
}

// TestBuildRunsPolicyPlugins: a broker built from a Spec naming
// plugin:builtin:paper002 for trust and plugin:builtin:srrm for admission
// runs both out of process (gridsub re-executed as `gridsub plugin serve
// KIND NAME`), lists them, and decides through them: the trust policy the
// daemon's trust task asks is the plugin and scores as paper002 does in
// process; a reservation is admitted by the admission plugin, whose
// process, killed just before, is started again by that call.
func TestBuildRunsPolicyPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub")
	}
	bin := filepath.Join(t.TempDir(), "gridsub")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/gridsub/gridsub/cmd/gridsub").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	old := selfExecutable
	selfExecutable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { selfExecutable = old })

	ctx := context.Background()
	spec := simSpec(bridge.NewMemStore(), epoch)
	spec.Policies = PolicyNames{Trust: "plugin:builtin:paper002", Admission: "plugin:builtin:srrm"}
	events := make(chan PluginEvent, 10)
	e, err := Build(ctx, spec, Options{OnPlugin: func(ev PluginEvent) { events <- ev }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ls := e.PolicyPlugins()
	if len(ls) != 2 || ls[0].Kind != plugins.KindAdmission || ls[1].Kind != plugins.KindTrust {
		t.Fatalf("listings %+v", ls)
	}
	for _, l := range ls {
		if l.Mode != plugins.ModeIsolated || l.Pid <= 0 || l.Pid == os.Getpid() || l.Health != "ok" {
			t.Errorf("listing %+v", l)
		}
	}
	if l := ls[0]; l.Impl != "srrm" || l.Fallback != "drrm" {
		t.Errorf("admission listing %+v", l)
	}
	if c := e.ConfiguredPolicies(); c[plugins.KindTrust] != "plugin:builtin:paper002" || c[plugins.KindAdmission] != "plugin:builtin:srrm" ||
		c[plugins.KindFeasibility] != "capacity" || c[plugins.KindPlacement] == "" {
		t.Errorf("configured %v", c)
	}

	tp := e.Broker.TrustPolicy()
	if _, ok := tp.(interface{ Plugin() *policyrpc.Plugin }); !ok {
		t.Fatalf("the broker's trust policy is a %T, not the plugin", tp)
	}
	local, err := registry.Trust("paper002")
	if err != nil {
		t.Fatal(err)
	}
	in := &policy.TrustInput{Sites: []policy.TrustNode{{Name: "A", Power: 4}, {Name: "B", Power: 4}},
		Outcomes: map[policy.TrustKey]policy.Outcomes{{To: "A"}: {Completed: 9, Failed: 1}, {To: "B"}: {Completed: 2, Failed: 3, Unreachable: 1}}}
	got, err := tp.Scores(in)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := local.Scores(in)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plugin scores %v, in process %v", got, want)
	}

	p, err := os.FindProcess(ls[0].Pid)
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	for deadline := time.Now().Add(10 * time.Second); e.PolicyPlugins()[0].Health == "ok"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed admission plugin still lists as ok")
		}
	}
	j, err := e.Broker.Submit(ctx, bridge.Request{Name: "r", Command: []string{"true"}, Nodes: 2, Estimate: time.Hour,
		Window: &bridge.Window{Earliest: epoch.Add(time.Hour), Latest: epoch.Add(3 * time.Hour)}}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != bridge.Reserved {
		t.Fatalf("the reservation is %s: %s", j.State, j.Reason)
	}
	if l := e.PolicyPlugins()[0]; l.Restarts != 1 || l.Pid <= 0 || l.Pid == ls[0].Pid || l.Health != "ok" {
		t.Errorf("after the admission: %+v", l)
	}
	select {
	case ev := <-events:
		if ev.Plugin != plugins.KindAdmission || ev.Kind != EventPolicyRestarted {
			t.Errorf("event %+v", ev)
		}
	default:
		t.Error("no event for the restart")
	}
}
