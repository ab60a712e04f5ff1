package transport

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gridsub/gridsub/backends/regularfile"
)

// hostKeys is the host key policy of one Config.
type hostKeys struct {
	cb    ssh.HostKeyCallback
	algos []string // HostKeyAlgorithms: the algorithms of known keys first
}

// newHostKeys reads the known_hosts files (a missing file counts as empty,
// so that the error for an unknown host says which file to add it to).
//
// With InsecureIgnoreHostKey the files are read all the same (the
// configured ones, else ~/.ssh/known_hosts): a host they list must still
// offer a listed key (else ErrHostKeyChanged, or ErrHostKeyRevoked), and
// only a host they do not list at all is let through unchecked, with a
// WARN naming the key. The flag covers hosts absent from known_hosts, never
// a key that contradicts it.
func newHostKeys(cfg Config) (*hostKeys, error) {
	paths := cfg.KnownHosts
	if cfg.InsecureIgnoreHostKey && len(paths) == 0 {
		if home, err := os.UserHomeDir(); err == nil {
			paths = []string{filepath.Join(home, ".ssh", "known_hosts")}
		}
	}
	var files []string
	for _, f := range paths {
		// knownhosts reads the files itself: each is first checked to be a
		// regular file of bounded size, so a FIFO or a device is refused
		// instead of hanging or exhausting the reader.
		fh, err := regularfile.Open(f, MaxKnownHostsFile)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("known_hosts file %s: %w", f, err)
		}
		fh.Close()
		files = append(files, f)
	}
	var kh ssh.HostKeyCallback
	if len(files) > 0 {
		var err error
		if kh, err = knownhosts.New(files...); err != nil {
			return nil, fmt.Errorf("reading known_hosts: %w", err)
		}
	} else {
		kh = func(string, net.Addr, ssh.PublicKey) error { return &knownhosts.KeyError{} }
	}
	hk := &hostKeys{}
	if cfg.InsecureIgnoreHostKey {
		log := cfg.Logger
		cfg.KnownHosts = paths // for the messages
		hk.cb = func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			err := kh(hostname, remote, key)
			var ke *knownhosts.KeyError
			if errors.As(err, &ke) && len(ke.Want) == 0 {
				log.Warn("ssh host key NOT CHECKED (InsecureIgnoreHostKey is set and known_hosts does not list the host): this connection can be intercepted",
					"host", cfg.Host, "port", cfg.Port, "key_type", key.Type(), "fingerprint", ssh.FingerprintSHA256(key))
				return nil
			}
			if err != nil {
				return fmt.Errorf("%w (insecure_ignore_host_key skips the check only for hosts that known_hosts does not list)",
					explainHostKeyError(cfg, key, err))
			}
			return nil
		}
	} else {
		hk.cb = func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			return explainHostKeyError(cfg, key, kh(hostname, remote, key))
		}
	}
	// A host certificate outside its validity window is refused with the
	// window, before knownhosts' terse "cert has expired".
	check := hk.cb
	hk.cb = func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		if cert, ok := key.(*ssh.Certificate); ok && cert.CertType == ssh.HostCert {
			if msg := certWindow(cert, time.Now()); msg != "" {
				return fmt.Errorf("%w: %s offered host certificate %q (signed by CA %s), which %s",
					ErrHostCertInvalid, knownHostsName(cfg), cert.KeyId, ssh.FingerprintSHA256(cert.SignatureKey), msg)
			}
		}
		return check(hostname, remote, key)
	}
	hk.algos = preferredHostKeyAlgos(cfg, files, kh)
	return hk, nil
}

// preferredHostKeyAlgos asks the known_hosts database which keys it holds
// for the host (by checking a throw-away key) and puts their algorithms
// first, the way OpenSSH does; otherwise a server with several host keys
// could present one that known_hosts does not list and look "changed".
// When a @cert-authority line covers the host, the certificate algorithms
// go first (as OpenSSH orders them), so a server with a host certificate
// presents it rather than its bare key.
func preferredHostKeyAlgos(cfg Config, files []string, kh ssh.HostKeyCallback) []string {
	var algos []string
	if caCovers(cfg, files) {
		for _, a := range ssh.SupportedAlgorithms().HostKeys {
			if strings.Contains(a, "-cert-") {
				algos = append(algos, a)
			}
		}
	}
	for _, k := range knownFor(cfg, kh) {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256)
		default:
			algos = append(algos, t)
		}
	}
	if len(algos) == 0 {
		return nil // nothing known: keep the library default
	}
	algos = append(algos, ssh.SupportedAlgorithms().HostKeys...)
	var out []string
	for _, a := range algos {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// knownFor is the keys kh lists for the host (plain lines and CAs alike).
func knownFor(cfg Config, kh ssh.HostKeyCallback) []knownhosts.KnownKey {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil
	}
	probe, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil
	}
	remote := &net.TCPAddr{IP: net.ParseIP(cfg.Host), Port: cfg.Port}
	if remote.IP == nil {
		remote.IP = net.IPv4zero
	}
	var ke *knownhosts.KeyError
	if !errors.As(kh(cfg.addr(), remote, probe.PublicKey()), &ke) {
		return nil
	}
	return ke.Want
}

// caCovers reports whether a @cert-authority line of the files covers the
// host: those lines alone are read into a database (a temporary file:
// knownhosts reads files only) and asked for the host.
func caCovers(cfg Config, files []string) bool {
	var lines []string
	for _, f := range files {
		b, err := regularfile.Read(f, MaxKnownHostsFile)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "@cert-authority") {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) == 0 {
		return false
	}
	tmp, err := os.CreateTemp("", "gridsub-ca-*")
	if err != nil {
		return false
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(strings.Join(lines, "\n") + "\n")
	tmp.Close()
	if err != nil {
		return false
	}
	kh, err := knownhosts.New(tmp.Name())
	if err != nil {
		return false
	}
	return len(knownFor(cfg, kh)) > 0
}

// knownHostsName is the host as known_hosts and ssh-keygen -R spell it.
func knownHostsName(cfg Config) string {
	if cfg.Port == 22 {
		return cfg.Host
	}
	return "[" + cfg.Host + "]:" + strconv.Itoa(cfg.Port)
}

// explainHostKeyError turns a knownhosts error into one of the sentinels
// with a message that says what happened and what to do.
func explainHostKeyError(cfg Config, key ssh.PublicKey, err error) error {
	if err == nil {
		return nil
	}
	fp := ssh.FingerprintSHA256(key)
	file := "~/.ssh/known_hosts"
	if len(cfg.KnownHosts) > 0 {
		file = cfg.KnownHosts[0]
	}
	var rev *knownhosts.RevokedError
	if errors.As(err, &rev) {
		return fmt.Errorf("%w: %s offered %s key %s, which %s:%d marks @revoked; ask the site admins for the current key",
			ErrHostKeyRevoked, knownHostsName(cfg), key.Type(), fp, rev.Revoked.Filename, rev.Revoked.Line)
	}
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) && strings.Contains(err.Error(), "no authorities for hostname") {
		// A host certificate and no @cert-authority line for the host.
		ke = &knownhosts.KeyError{}
	} else if !errors.As(err, &ke) {
		return fmt.Errorf("checking host key of %s: %w", knownHostsName(cfg), err)
	}
	if len(ke.Want) == 0 {
		portFlag := ""
		if cfg.Port != 22 {
			portFlag = "-p " + strconv.Itoa(cfg.Port) + " "
		}
		return fmt.Errorf("%w: %s offered %s key %s and no known_hosts entry (%s) matches %s. "+
			"Verify that fingerprint with the site's admins, then add the key with: ssh-keyscan %s%s >> %s",
			ErrHostKeyUnknown, cfg.addr(), key.Type(), fp, strings.Join(cfg.KnownHosts, ", "),
			knownHostsName(cfg), portFlag, cfg.Host, file)
	}
	var known, fix []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		known = append(known, fmt.Sprintf("%s:%d (%s %s)", k.Filename, k.Line, k.Key.Type(), ssh.FingerprintSHA256(k.Key)))
		if !seen[k.Filename] {
			seen[k.Filename] = true
			fix = append(fix, fmt.Sprintf("ssh-keygen -R '%s' -f %s", knownHostsName(cfg), k.Filename))
		}
	}
	return fmt.Errorf("%w: WARNING: host %s port %d offered %s key %s, which does not match the key(s) known_hosts lists for %s: %s. "+
		"Someone may be intercepting the connection, or the site replaced its host key. "+
		"Verify the new fingerprint with the site's admins; only then remove the old entry with: %s (and add the new key)",
		ErrHostKeyChanged, cfg.Host, cfg.Port, key.Type(), fp, knownHostsName(cfg),
		strings.Join(known, "; "), strings.Join(fix, " && "))
}

// Bounds of the files the transport reads (regularfile): a private key or
// a certificate is a few KiB, a known_hosts file rarely more than a few MiB.
const (
	MaxKeyFile        = 1 << 20
	MaxKnownHostsFile = 16 << 20
)
