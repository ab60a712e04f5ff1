package plugins

import (
	"log/slog"

	"github.com/gridsub/gridsub/backends/transport"
)

// SSHTransport is the transport configuration of a site reached over SSH,
// built from its BackendConfig as the built-in slurm and pbs backends
// build theirs: host, port, user, key files and known_hosts from the ssh
// section, the staging limits every transfer keeps, a lazy connection (a
// site down at start does not stop the broker). kind names the backend in
// errors; log (nil: slog.Default) gets the site's name. An external
// plugin reaching its site over SSH passes the result to sshbatch.Dial.
func (c *BackendConfig) SSHTransport(kind string, log *slog.Logger) (*transport.Config, error) {
	if log == nil {
		log = slog.Default()
	}
	return sshConfig(c, kind, log)
}
