package plugins

import (
	"context"
	"encoding/json"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
)

// TestBackend serves the backend f builds through a real gRPC connection in
// process (go-plugin's TestPluginGRPCConn: the same shims, converters and
// error mapping as a plugin executable, without the process) and returns
// the configured client and the server, which the test may Stop to play a
// plugin that died. Both are shut down when the test ends.
func TestBackend(t testing.TB, f backendrpc.Factory, cfg BackendConfig) (*backendrpc.Client, *goplugin.GRPCServer) {
	t.Helper()
	client, server := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		KindBackend: &backendrpc.Plugin{Factory: f, Version: "test", Label: cfg.Name},
	})
	// Closing the client shuts the server down (go-plugin's controller
	// Shutdown); stopping it here as well would race inside go-plugin.
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(KindBackend)
	if err != nil {
		t.Fatalf("dispense %s: %v", KindBackend, err)
	}
	c := raw.(*backendrpc.Client)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Configure(context.Background(), js); err != nil {
		t.Fatalf("configure %s: %v", cfg.Name, err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping %s: %v", cfg.Name, err)
	}
	return c, server
}

// TestBackendValue is TestBackend for a backend value built by the test.
func TestBackendValue(t testing.TB, b backends.Backend) (*backendrpc.Client, *goplugin.GRPCServer) {
	t.Helper()
	return TestBackend(t, func(context.Context, []byte) (backends.Backend, error) { return b, nil }, BackendConfig{Name: b.Name()})
}
