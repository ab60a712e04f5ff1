// Command gridsub-gridengine is the Grid Engine backend as an external
// gridsub plugin: name it, with its SHA-256, in a site's `plugin` section
// (kind: gridengine). Run by hand it says it is a plugin and exits.
package main

import (
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/examples/plugins/gridengine"
)

// The site is built from gridsub's configuration of it when gridsub
// configures the plugin.
func main() { plugins.ServeBackendFactory(gridengine.FromConfig, plugins.Version()) }
