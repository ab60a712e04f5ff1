package plannerrpc

import (
	"os/exec"
	"syscall"
)

// dieWithHost makes the kernel SIGKILL the plugin process when the host
// that started it dies, however it dies (a SIGKILLed daemon included):
// no planner process outlives its broker. (Pdeathsig follows the thread
// that forked; the Go runtime does not end its threads while gridsub
// runs, so in practice it is the process.)
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
