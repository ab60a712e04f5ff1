package policyrpc

import (
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
)

// Test serves impl as a policy plugin of kind through a real gRPC
// connection in process (go-plugin's TestPluginGRPCConn: the same shims,
// converters and error mapping as a plugin executable, without the
// process) and returns the host's client (*TrustClient, ...) and the
// server, which the test may Stop to play a plugin that died. Both are
// shut down when the test ends.
func Test(t testing.TB, kind string, impl any) (any, *goplugin.GRPCServer) {
	t.Helper()
	client, server := goplugin.TestPluginGRPCConn(t, false, PluginMap(kind, impl, "test"))
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(kind)
	if err != nil {
		t.Fatalf("dispense %s: %v", kind, err)
	}
	return raw, server
}
