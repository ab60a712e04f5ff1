package main

import (
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/examples/plugins/leastloaded"
)

func main() { plannerrpc.ServePlanner(leastloaded.New()) }
