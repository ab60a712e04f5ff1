// Command testpolicy serves a built-in policy of any kind as a plugin, for
// policyrpc's tests: `testpolicy KIND NAME` (what `gridsub plugin serve
// KIND NAME` does, in a small binary).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: testpolicy KIND NAME")
		os.Exit(2)
	}
	impl, _, err := policyrpc.Open(context.Background(), os.Args[1], os.Args[2], policyrpc.Config{})
	if err == nil {
		err = policyrpc.Serve(os.Args[1], impl, "test")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
