// Command gridsub-localsite serves gridsub's built-in local site
// (backends/local) as an external backend plugin: the smallest plugin main,
// one call of plugins.ServeBackendFactory.
package main

import (
	"github.com/gridsub/gridsub/backends/local"
	"github.com/gridsub/gridsub/bridge/plugins"
)

func main() { plugins.ServeBackendFactory(local.FromConfig, plugins.Version()) }
