package sshbatch

import (
	"context"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

// Dial connects to the site's login node over SSH (one connection, shared
// by every command and by SFTP) and returns the backend of dialect d
// driving it. cfg.User defaults to ssh.User, cfg.MaxFileSize to
// ssh.MaxFileSize. Close the backend to close the connection. With
// ssh.Lazy an unreachable site is not an error: the backend connects on
// first use and ConnErr says why it cannot yet.
func Dial(ctx context.Context, cfg Config, d Dialect, ssh transport.Config) (*Backend, error) {
	// The login user may come from the OpenSSH configuration.
	ssh, err := transport.ResolveSSHConfig(ctx, ssh)
	if err != nil {
		return nil, fmt.Errorf("%s site %s: %w", d.Traits().Kind, cfg.Name, err)
	}
	ssh.SSHConfig = ""
	if cfg.User == "" {
		cfg.User = ssh.User
	}
	if cfg.MaxFileSize == 0 {
		cfg.MaxFileSize = ssh.MaxFileSize
	}
	if cfg.Logger != nil && ssh.Logger == nil {
		ssh.Logger = cfg.Logger
	}
	c, err := transport.Dial(ctx, ssh)
	if err != nil {
		return nil, fmt.Errorf("%s site %s: %w", d.Traits().Kind, cfg.Name, err)
	}
	b := New(cfg, d, c, func(root string) backends.Stager { return c.Stager(root) })
	b.link = NewLink(c)
	return b, nil
}

// ConnErr implements backends.Connectivity: why the connection Dial made
// is down (with transport.Config.Lazy, Dial succeeds while the site is
// unreachable), nil while it is up or for a Backend built with New.
func (b *Backend) ConnErr() error { return b.link.ConnErr() }

// LinkEstimate implements backends.LinkEstimator from the connection's
// transfer measurements (transport.Estimator); ok is false for a Backend
// built with New or before the first transfer.
func (b *Backend) LinkEstimate() (float64, time.Duration, bool) { return b.link.LinkEstimate() }

// Login logs the site's connection in, p answering what only a person can
// (see transport.Client.Login); the daemon's `gridsub login` calls it.
func (b *Backend) Login(ctx context.Context, p transport.Prompter) (already bool, err error) {
	return b.link.Login(ctx, p)
}

// Close releases the connection Dial made (a no-op for a Backend built
// with New, whose Runner belongs to the caller).
func (b *Backend) Close() error { return b.link.Close() }
