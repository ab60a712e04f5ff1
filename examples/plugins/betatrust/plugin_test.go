package betatrust

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
)

// buildPlugin builds cmd/gridsub-betatrust and returns the executable and
// its SHA-256.
func buildPlugin(t *testing.T) (string, string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gridsub-betatrust")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/gridsub-betatrust").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return bin, hex.EncodeToString(sum[:])
}

// loadPlugin starts the plugin out of process, checksummed.
func loadPlugin(t *testing.T, bin, sum string) policy.Trust {
	t.Helper()
	p, err := policyrpc.Load(context.Background(), plugins.KindTrust, policyrpc.Config{Path: bin, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if p.Pid() <= 0 || p.Pid() == os.Getpid() {
		t.Fatalf("the plugin runs as pid %d", p.Pid())
	}
	return p.Policy().(policy.Trust)
}

// TestOutOfProcess: the plugin, built from its own main, started out of
// process with its checksum checked, answers exactly what the model
// answers in process; a wrong checksum does not start it.
func TestOutOfProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the plugin")
	}
	bin, sum := buildPlugin(t)
	remote := loadPlugin(t, bin, sum)
	local := New()
	if remote.Name() != Name {
		t.Errorf("the plugin is named %q", remote.Name())
	}
	r := rand.New(rand.NewPCG(11, 12))
	for range 50 {
		in := &policy.TrustInput{Observer: policy.TrustNode{Name: ""}, Outcomes: map[policy.TrustKey]policy.Outcomes{}}
		for i := range 8 {
			in.Sites = append(in.Sites, policy.TrustNode{Name: fmt.Sprintf("s%d", i), Power: float64(r.IntN(100))})
		}
		for range 12 {
			from := ""
			if r.IntN(3) == 0 {
				from = in.Sites[r.IntN(8)].Name
			}
			in.Outcomes[policy.TrustKey{From: from, To: in.Sites[r.IntN(8)].Name}] = policy.Outcomes{
				Completed: r.Float64() * 20, Failed: r.Float64() * 5, Unreachable: float64(r.IntN(3))}
		}
		want, _ := local.Scores(in)
		got, err := remote.Scores(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Scores %v %v, want %v", got, err, want)
		}
		o := in.Outcomes[policy.TrustKey{To: "s1"}]
		e, h := time.Duration(r.IntN(100))*time.Minute, time.Duration(r.IntN(3))*time.Hour
		if g, w := remote.Decay(o, e, h), local.Decay(o, e, h); g != w {
			t.Fatalf("Decay %v, want %v", g, w)
		}
	}
	_, err := policyrpc.Load(context.Background(), plugins.KindTrust, policyrpc.Config{Path: bin, SHA256: strings.Repeat("0", 64)})
	if !errors.Is(err, plugins.ErrChecksum) {
		t.Errorf("a wrong checksum: %v", err)
	}
	// Served as another kind, it is refused at the handshake's dispense.
	if _, err := policyrpc.Load(context.Background(), plugins.KindRemap, policyrpc.Config{Path: bin, SHA256: sum}); err == nil {
		t.Error("a trust plugin was dispensed as remap")
	}
}
