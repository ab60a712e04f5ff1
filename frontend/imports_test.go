package frontend

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFrontendImports: gridsub-fe (and so this package) links none of
// what makes gridsub slow to start — the command tree, the daemon, the
// sites, the plugin machinery, the policies' registry, the simulator,
// metrics and plots. A front-end call is a process start; what this list
// would add is paid on every one.
func TestFrontendImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/gridsub/gridsub/cmd/gridsub-fe").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	heavy := []string{"github.com/spf13/cobra", "github.com/prometheus/", "google.golang.org/grpc", "google.golang.org/protobuf",
		"gonum.org/", "github.com/hashicorp/go-plugin", "github.com/gridsub/gridsub/internal/", "github.com/gridsub/gridsub/bridge/daemon",
		"github.com/gridsub/gridsub/bridge/assemble", "github.com/gridsub/gridsub/bridge/plugins", "github.com/gridsub/gridsub/simbackend",
		"github.com/gridsub/gridsub/backends/sshbatch", "github.com/gridsub/gridsub/backends/slurm", "github.com/gridsub/gridsub/backends/pbs",
		"github.com/gridsub/gridsub/backends/local", "github.com/gridsub/gridsub/policy/registry"}
	n := 0
	for _, p := range strings.Fields(string(out)) {
		n++
		for _, h := range heavy {
			if strings.HasPrefix(p, h) {
				t.Errorf("gridsub-fe links %s", p)
			}
		}
	}
	if n < 50 {
		t.Fatalf("go list -deps named %d packages: %s", n, out)
	}
}
