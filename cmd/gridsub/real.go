package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/internal/config"
)

// realSite returns the constructor of a site reached over SSH: one
// connection per site, host key checked, key file or agent. (A site with
// isolate or a plugin section is built by pluginSite.)
func realSite(s *config.Site, st *config.Staging, log *slog.Logger) (func(context.Context) (backends.Backend, io.Closer, error), error) {
	if s.SSH == nil {
		return nil, fmt.Errorf("site %s: kind %s needs an ssh section (host, port, user, key_file, known_hosts)", s.Name, s.Kind)
	}
	ssh := transport.Config{Host: s.SSH.Host, Port: s.SSH.Port, User: s.SSH.User, UseAgent: s.SSH.Agent,
		InsecureIgnoreHostKey: s.SSH.InsecureIgnoreHostKey, MaxSessions: s.SSH.MaxSessions, Logger: log,
		// A site that is down at start does not stop the others: the broker
		// sees it as down (its calls fail) and it is used once it answers.
		// Host key and authentication errors still stop everything.
		Lazy: true,
		// Every transfer bounded (staging.*): per file, and in time.
		MaxFileSize: int64(st.MaxFileSize), MinTransferRate: float64(st.MinRate), MinTransferTime: st.MinTime}
	if s.SSH.KeyFile != "" {
		ssh.KeyFiles = []string{s.SSH.KeyFile}
	}
	if s.SSH.KnownHosts != "" {
		ssh.KnownHosts = []string{s.SSH.KnownHosts}
	}
	switch s.Kind {
	case config.KindSlurm:
		cfg := slurm.Config{Name: s.Name, Partition: s.Partition, Account: s.Account, RemoteDir: s.RemoteDir, User: s.SSH.User, Logger: log,
			MaxJobBytes: int64(st.MaxJobBytes)}
		return func(ctx context.Context) (backends.Backend, io.Closer, error) {
			b, err := slurm.Connect(ctx, cfg, ssh)
			if err != nil {
				return nil, nil, err
			}
			return b, b, nil
		}, nil
	case config.KindPBS:
		cfg := pbs.Config{Name: s.Name, Queue: s.Partition, Account: s.Account, RemoteDir: s.RemoteDir, User: s.SSH.User, BinDir: s.BinDir, Logger: log}
		return func(ctx context.Context) (backends.Backend, io.Closer, error) {
			b, err := pbs.Connect(ctx, cfg, ssh)
			if err != nil {
				return nil, nil, err
			}
			return b, b, nil
		}, nil
	default:
		return nil, fmt.Errorf("site %s: kind %q has no backend in this build yet (available: sim, slurm, pbs)", s.Name, s.Kind)
	}
}
