package assemble

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
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
}
