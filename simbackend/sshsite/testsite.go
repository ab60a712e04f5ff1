package sshsite

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends/regularfile"
)

// ClientKey is a login key generated for a client of simulated sites.
type ClientKey struct {
	File   string // private key file (OpenSSH format, 0600)
	Public ssh.PublicKey
}

// NewClientKey generates an ed25519 key and writes it to file (0600).
func NewClientKey(file string) (*ClientKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "gridsub simsite client")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(blk), 0o600); err != nil {
		return nil, err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file+".pub", ssh.MarshalAuthorizedKey(sp), 0o644); err != nil {
		return nil, err
	}
	return &ClientKey{File: file, Public: sp}, nil
}

// ReadAuthorizedKeys reads an authorized_keys (or .pub) file: a regular
// file of at most 1 MiB (a FIFO or a device is refused, never read).
func ReadAuthorizedKeys(file string) ([]ssh.PublicKey, error) {
	b, err := regularfile.Read(file, maxAuthorizedKeys)
	if err != nil {
		return nil, err
	}
	var keys []ssh.PublicKey
	for len(b) > 0 {
		k, _, _, rest, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			break
		}
		keys = append(keys, k)
		b = rest
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no public key in it", file)
	}
	return keys, nil
}

// WriteKnownHosts writes the site's known_hosts line to file (0644).
func (s *Site) WriteKnownHosts(file string) error {
	return writeFileAtomic(file, []byte(s.KnownHosts()+"\n"))
}

// Transport is the transport.Config reaching the site with key, checking
// its host key against knownHosts (written by WriteKnownHosts).
func (s *Site) Transport(key, knownHosts string) transport.Config {
	host, port, _ := net.SplitHostPort(s.Addr())
	p, _ := strconv.Atoi(port)
	return transport.Config{Host: host, Port: p, User: s.cfg.User, KeyFiles: []string{key},
		KnownHosts: []string{knownHosts}, MaxSessions: 8, KeepAlive: 30 * time.Second}
}

// Backend connects the dialect's real backend (backends/slurm or
// backends/pbs) to the site over SSH, with its remote directory
// <home>/<remoteDir> and the site's clock; close it with Close.
func (s *Site) Backend(ctx context.Context, key, knownHosts, remoteDir string) (backends.Backend, func() error, error) {
	tc := s.Transport(key, knownHosts)
	rd := filepath.Join(s.home, remoteDir)
	user := s.cfg.User
	if s.cfg.Dialect == SLURM {
		b, err := slurm.Connect(ctx, slurm.Config{Name: s.cfg.Name, RemoteDir: rd, User: user, Now: s.Now}, tc)
		if err != nil {
			return nil, nil, err
		}
		return b, b.Close, nil
	}
	b, err := pbs.Connect(ctx, pbs.Config{Name: s.cfg.Name, RemoteDir: rd, User: user, BinDir: s.bin, Now: s.Now,
		Location: time.Local, ResvWait: 5 * time.Second}, tc)
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}
