package main

import (
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/examples/plugins/localsite"
)

func main() { plugins.ServeBackendFactory(localsite.FromConfig, plugins.Version()) }
