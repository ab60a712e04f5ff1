package plugins_test

import (
	"context"
	"testing"

	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// A site's Prompter reaches its transport in process and never crosses to
// an isolated plugin (which shows "needs login" instead of asking).
func TestPrompterStaysInProcess(t *testing.T) {
	p := transport.PrompterFunc(func(context.Context, transport.Challenge) ([]string, error) { return nil, nil })
	spec := plugins.BackendSpec{Builtin: "slurm", Prompter: p, Config: plugins.BackendConfig{Name: "s", Kind: "slurm", RemoteDir: "/r",
		SSH: &plugins.SSHConfig{Host: "h", User: "u", KeyFiles: []string{"/k"}, KnownHosts: []string{"/kh"}}}}
	r, err := plugins.Resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	if r.SSH.Prompter == nil {
		t.Error("in process: the Prompter did not reach the transport")
	}
	spec.Isolate = true
	r, err = plugins.Resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	if r.SSH.Prompter != nil {
		t.Error("isolated: the Prompter crossed the plugin boundary")
	}
}
