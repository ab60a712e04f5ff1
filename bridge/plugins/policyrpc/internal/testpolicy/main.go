// Command testpolicy serves a built-in policy of any kind as a plugin, for
// policyrpc's tests: `testpolicy KIND NAME` (what `gridsub plugin serve
// KIND NAME` does, in a small binary). `testpolicy trust hang` serves a
// trust policy whose Scores never returns.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
)

type hang struct{}

func (hang) Name() string { return "hang" }
func (hang) Scores(*policy.TrustInput) (map[string]float64, error) {
	select {}
}
func (hang) Decay(o policy.Outcomes, _, _ time.Duration) policy.Outcomes { return o }

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: testpolicy KIND NAME")
		os.Exit(2)
	}
	var impl any = hang{}
	var err error
	if os.Args[1] != "trust" || os.Args[2] != "hang" {
		impl, _, err = policyrpc.Open(context.Background(), os.Args[1], os.Args[2], policyrpc.Config{})
	}
	if err == nil {
		err = policyrpc.Serve(os.Args[1], impl, "test")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
