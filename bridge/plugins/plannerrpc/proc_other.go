//go:build !linux

package plannerrpc

import "os/exec"

// dieWithHost does nothing where the kernel cannot kill a child with its
// parent: there a host that is killed leaves its plugin to exit when its
// connection closes, or to be killed by hand.
func dieWithHost(*exec.Cmd) {}
