package plugins

import (
	"os/exec"
	"syscall"
)

// DieWithHost makes the kernel SIGKILL a plugin process when the host
// that started it dies, however it dies (a SIGKILLed daemon included), so
// no plugin outlives its broker. Pdeathsig follows the thread that forked;
// the Go runtime does not end its threads while gridsub runs (nothing in
// gridsub exits a goroutine locked to its thread), so in practice it is
// the process. A no-op outside Linux.
func DieWithHost(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
