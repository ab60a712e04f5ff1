// Command gridsub-betatrust serves the beta reputation trust model as a
// gridsub policy plugin (kind trust). gridsub starts it; run by hand it
// says it is a plugin and exits.
package main

import (
	"fmt"
	"os"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/examples/plugins/betatrust"
)

func main() {
	if err := policyrpc.Serve(plugins.KindTrust, betatrust.New(), "0.1.0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
