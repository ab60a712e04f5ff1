package leastloaded

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/simbackend/replay"
)

type plain struct{ policy.Planner }

func TestReplayThroughPlugin(t *testing.T) {
	jobs := ctc(t, 10000)
	bin := filepath.Join(t.TempDir(), "gridsub-leastloaded")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/gridsub-leastloaded").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, _ := os.ReadFile(bin)
	sum := sha256.Sum256(b)
	p, err := plannerrpc.Load(context.Background(), plannerrpc.Config{Path: bin, SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	setup := replay.Setup{Sites: []replay.Site{{Name: "Beijing", Nodes: 128, H: 1}, {Name: "Shanghai", Nodes: 64, H: 1}, {Name: "Harbin", Nodes: 32, H: 1}},
		Links: links(3, 1e-6, 575*time.Millisecond), MultiSite: 1.1}
	var want string
	for _, c := range []struct {
		name string
		pl   policy.Planner
	}{{"in process, session", New()}, {"in process, snapshot", plain{New()}}, {"plugin, session", p.Planner()}, {"plugin, snapshot", plain{p.Planner()}}} {
		setup.Planner = c.pl
		t0 := time.Now()
		res, err := replay.Run(context.Background(), setup, jobs, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(res.Records)
		if want == "" {
			want = string(a)
		}
		t.Logf("%-22s %d cycles %8s identical %v", c.name, res.Cycles, time.Since(t0).Round(time.Millisecond), string(a) == want)
		if string(a) != want {
			t.Fatal("records differ")
		}
	}
}
