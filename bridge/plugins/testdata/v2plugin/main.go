// Command v2plugin is a test plugin built against a future protocol
// version (2): a host speaking version 1 must refuse it and name both
// versions.
package main

import (
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
)

func main() {
	hs := plugins.Handshake
	hs.ProtocolVersion = 2
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: hs,
		VersionedPlugins: map[int]goplugin.PluginSet{
			2: {plugins.KindBackend: &backendrpc.Plugin{}},
		},
		GRPCServer: goplugin.DefaultGRPCServer,
	})
}
