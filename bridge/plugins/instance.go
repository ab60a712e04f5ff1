package plugins

import (
	"os"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins/backendrpc"
)

// Modes of an instance.
const (
	ModeInProcess = "in-process" // a built-in, a Go value in gridsub's own process (the fast path)
	ModeIsolated  = "isolated"   // a built-in re-executed as `gridsub plugin serve backend NAME`
	ModeExternal  = "external"   // an executable named by the configuration, checksummed
)

// Instance is one loaded plugin: a Go value in process or a process
// speaking gRPC.
type Instance struct {
	Name    string // what it serves (the site's name)
	Kind    string // KindBackend
	Mode    string // ModeInProcess, ModeIsolated or ModeExternal
	Impl    string // the built-in's name or the executable's path
	Version string // the plugin's semver as it reported it
	SHA256  string // the executable's checksum, verified before it started ("" in process)
	Pid     int    // the plugin process (0 in process)

	// Backend is the loaded backend; out of process it is Client.
	Backend backends.Backend
	// Client is the gRPC client shim (nil in process).
	Client *backendrpc.Client

	proc *goplugin.Client
}

// Exited reports whether the plugin process is gone (never in process).
func (i *Instance) Exited() bool { return i.proc != nil && i.proc.Exited() }

// Kill ends the plugin process (gracefully, then by force after
// killGrace: go-plugin's own graceful shutdown waits forever on a hung
// process) and waits for it. In process it closes the backend when it has
// a Close method.
func (i *Instance) Kill() {
	if i.proc != nil {
		done := make(chan struct{})
		go func() {
			i.proc.Kill()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(killGrace):
			i.forceKill()
			<-done
		}
		return
	}
	if c, ok := i.Backend.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// ForceKill ends the plugin process at once (SIGKILL), for a plugin found
// dead or hung, then lets go-plugin clean up.
func (i *Instance) ForceKill() {
	if i.proc == nil {
		return
	}
	i.forceKill()
	i.proc.Kill()
}

func (i *Instance) forceKill() {
	if i.Pid > 0 {
		if p, err := os.FindProcess(i.Pid); err == nil {
			_ = p.Kill()
		}
	}
}

// killGrace is how long Kill waits for a graceful exit.
const killGrace = 2 * time.Second

// Listing is one loaded plugin as `gridsub plugins` shows it.
type Listing struct {
	Name     string `json:"name"`             // the site (or planner) it serves
	Kind     string `json:"kind"`             // KindBackend or KindPlanner
	Mode     string `json:"mode"`             // ModeInProcess, ModeIsolated or ModeExternal
	Impl     string `json:"impl"`             // the built-in's name or the executable's path
	Version  string `json:"version"`          // as the plugin reported it
	SHA256   string `json:"sha256,omitempty"` // verified before the executable started
	Pid      int    `json:"pid,omitempty"`    // the plugin process now
	Health   string `json:"health"`           // "ok", "restarting" or "down"
	Reason   string `json:"reason,omitempty"` // why it is restarting or down
	Restarts int    `json:"restarts"`         // restarts since gridsub started
	// Fallback is a planner plugin's fallback built-in; FallbackActive
	// says it plans now, in place of the plugin.
	Fallback       string `json:"fallback,omitempty"`
	FallbackActive bool   `json:"fallback_active,omitempty"`
}

// Describe lists the backend a site runs on: a supervised plugin's
// instance and health, or the built-in impl in process.
func Describe(site, impl string, b backends.Backend) Listing {
	if s, ok := b.(*Supervisor); ok {
		h := s.Health()
		l := Listing{Name: site, Kind: KindBackend, Mode: s.spec.mode(), Health: h.State, Reason: h.Reason, Restarts: h.Restarts}
		if inst := s.Instance(); inst != nil {
			l.Impl, l.Version, l.SHA256, l.Pid = inst.Impl, inst.Version, inst.SHA256, inst.Pid
		} else if s.spec.Path != "" {
			l.Impl = s.spec.Path
		} else {
			l.Impl = s.spec.Builtin
		}
		return l
	}
	return Listing{Name: site, Kind: KindBackend, Mode: ModeInProcess, Impl: impl, Version: Version(), Health: "ok"}
}

// ProcessPid is the process id of a go-plugin client's plugin: 0 when
// there is none or it has exited. The policy and planner plugin handles
// report it in their listings.
func ProcessPid(c *goplugin.Client) int {
	if c == nil || c.Exited() {
		return 0
	}
	if rc := c.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}
