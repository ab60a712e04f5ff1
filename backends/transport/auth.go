package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/gridsub/gridsub/backends/regularfile"
)

// passphraseTries is how often a wrong passphrase is asked again.
const passphraseTries = 3

// keyring holds the keys of encrypted key files once their passphrase was
// given, by path, for the Client's lifetime: a passphrase is asked once
// per run, then every connection (and every hop) uses the key. Nothing of
// it is written anywhere.
type keyring struct {
	mu   sync.Mutex
	keys map[string]ssh.Signer
}

func (k *keyring) get(path string) ssh.Signer {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[path]
}

func (k *keyring) put(path string, s ssh.Signer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[string]ssh.Signer{}
	}
	k.keys[path] = s
}

// offer is what one endpoint authenticates with at one connect.
type offer struct {
	signers []ssh.Signer
	desc    []string // what is offered, for error messages
	notes   []string // certificates left out, and why
	closer  func()
}

// loadOffer reads the key files and certificates of ep (at every connect,
// so a renewed short-lived certificate is picked up) and asks the agent
// for its keys. An encrypted key file whose passphrase is not in kr is
// asked for through p; with no p it fails with *errNoPrompter.
func loadOffer(ctx context.Context, ep *endpoint, kr *keyring, p Prompter, now time.Time) (*offer, error) {
	o := &offer{closer: func() {}}
	var keys []ssh.Signer
	var files []string
	for _, f := range ep.cfg.KeyFiles {
		s, err := readKey(ctx, ep, f, kr, p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, s)
		files = append(files, f)
	}
	if len(files) > 0 {
		o.desc = append(o.desc, "publickey from key files "+strings.Join(files, ", "))
	}
	if ep.cfg.UseAgent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		var agentKeys []ssh.Signer
		var err error
		if sock == "" {
			err = errors.New("SSH_AUTH_SOCK is not set")
		} else {
			var conn net.Conn
			if conn, err = net.Dial("unix", sock); err == nil {
				o.closer = func() { conn.Close() }
				agentKeys, err = agent.NewClient(conn).Signers()
			}
		}
		if err != nil {
			o.desc = append(o.desc, fmt.Sprintf("ssh-agent (unusable: %v)", err))
		} else {
			o.desc = append(o.desc, fmt.Sprintf("publickey from ssh-agent (%d keys)", len(agentKeys)))
		}
		keys = append(keys, agentKeys...)
	}
	certs, notes := loadCerts(ep.cfg, keys, now)
	o.notes = notes
	if len(certs) > 0 {
		o.desc = append(o.desc, fmt.Sprintf("%d user certificate(s)", len(certs)))
	}
	// Certificates first, as OpenSSH offers them: a server that trusts
	// the CA then never sees the bare key.
	o.signers = append(certs, keys...)
	return o, nil
}

// readKey reads one private key file, asking for its passphrase once.
func readKey(ctx context.Context, ep *endpoint, f string, kr *keyring, p Prompter) (ssh.Signer, error) {
	if s := kr.get(f); s != nil {
		return s, nil
	}
	pem, err := regularfile.Read(f, MaxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: reading key file for %s: %w", ErrAuth, ep.label, err)
	}
	s, err := ssh.ParsePrivateKey(pem)
	if err == nil {
		return s, nil
	}
	var pm *ssh.PassphraseMissingError
	if !errors.As(err, &pm) {
		return nil, fmt.Errorf("%w: key file %s is not a private key ssh can read: %w", ErrAuth, f, err)
	}
	if p == nil {
		return nil, &errNoPrompter{"key file " + f + " is protected by a passphrase"}
	}
	for try := 1; ; try++ {
		text := "Enter passphrase for key " + f + ": "
		if try > 1 {
			text = "Wrong passphrase. " + text
		}
		ans, perr := p.Prompt(ctx, Challenge{Target: ep.label, Kind: ChallengePassphrase,
			Questions: []Question{{Text: text}}})
		if perr != nil {
			return nil, fmt.Errorf("%w: the passphrase of %s was not given: %w", ErrAuth, f, perr)
		}
		if len(ans) != 1 {
			return nil, fmt.Errorf("%w: the passphrase of %s: %d answers to one question", ErrAuth, f, len(ans))
		}
		s, err = ssh.ParsePrivateKeyWithPassphrase(pem, []byte(ans[0]))
		if err == nil {
			kr.put(f, s)
			return s, nil
		}
		if try >= passphraseTries {
			return nil, fmt.Errorf("%w: wrong passphrase for key file %s (%d tries)", ErrAuth, f, try)
		}
	}
}

// loadCerts returns the user certificates that go with keys: the
// configured CertFiles, and "<key>-cert.pub" beside every key file, each
// matched to the key it certifies. A certificate outside its validity
// window is left out with a note saying so and giving the window; so is
// one whose key is not offered.
func loadCerts(cfg Config, keys []ssh.Signer, now time.Time) (certs []ssh.Signer, notes []string) {
	files := append([]string(nil), cfg.CertFiles...)
	for _, k := range cfg.KeyFiles {
		c := k + "-cert.pub"
		if _, err := os.Stat(c); err == nil && !contains(files, c) {
			files = append(files, c)
		}
	}
	for _, f := range files {
		b, err := regularfile.Read(f, MaxKeyFile)
		if err != nil {
			notes = append(notes, fmt.Sprintf("certificate %s unreadable: %v", f, err))
			continue
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
		cert, ok := pub.(*ssh.Certificate)
		if err != nil || !ok {
			notes = append(notes, fmt.Sprintf("%s is not an OpenSSH certificate", f))
			continue
		}
		if cert.CertType != ssh.UserCert {
			notes = append(notes, fmt.Sprintf("%s is a host certificate, not a user certificate", f))
			continue
		}
		if msg := certWindow(cert, now); msg != "" {
			notes = append(notes, fmt.Sprintf("user certificate %s (%q) %s", f, cert.KeyId, msg))
			continue
		}
		var match ssh.Signer
		for _, k := range keys {
			if bytes.Equal(k.PublicKey().Marshal(), cert.Key.Marshal()) {
				match = k
				break
			}
		}
		if match == nil {
			notes = append(notes, fmt.Sprintf("user certificate %s certifies a key that is not offered", f))
			continue
		}
		cs, err := ssh.NewCertSigner(cert, match)
		if err != nil {
			notes = append(notes, fmt.Sprintf("user certificate %s: %v", f, err))
			continue
		}
		certs = append(certs, cs)
	}
	return certs, notes
}

// certWindow is "" for a certificate valid at now, else why not, with its
// validity window ("expired at ...; valid from ... until ...").
func certWindow(c *ssh.Certificate, now time.Time) string {
	unix := uint64(now.Unix())
	if unix >= c.ValidAfter && (c.ValidBefore == ssh.CertTimeInfinity || unix < c.ValidBefore) {
		return ""
	}
	at := func(u uint64) string {
		if u == ssh.CertTimeInfinity {
			return "forever"
		}
		return time.Unix(int64(u), 0).UTC().Format(time.RFC3339)
	}
	window := fmt.Sprintf("valid from %s until %s; now is %s", at(c.ValidAfter), at(c.ValidBefore), now.UTC().Format(time.RFC3339))
	if unix < c.ValidAfter {
		return "is not yet valid (" + window + ")"
	}
	return "expired at " + at(c.ValidBefore) + " (" + window + ")"
}

// authMethods are the methods offered to ep: public keys (certificates
// first), then keyboard-interactive answered through p (with no p, a
// question fails the login with *errNoPrompter).
func (o *offer) authMethods(ctx context.Context, ep *endpoint, p Prompter) []ssh.AuthMethod {
	kbd := func(name, instruction string, questions []string, echos []bool) ([]string, error) {
		if len(questions) == 0 {
			return nil, nil
		}
		if p == nil {
			return nil, &errNoPrompter{fmt.Sprintf("%s asks %q (keyboard-interactive)", ep.label, strings.TrimSpace(strings.Join(questions, " ")))}
		}
		ch := Challenge{Target: ep.label, Kind: ChallengeKeyboard, Name: name, Instruction: instruction}
		for i, q := range questions {
			ch.Questions = append(ch.Questions, Question{Text: q, Echo: i < len(echos) && echos[i]})
		}
		ans, err := p.Prompt(ctx, ch)
		if err == nil && len(ans) != len(questions) {
			err = fmt.Errorf("%d answers to %d questions", len(ans), len(questions))
		}
		return ans, err
	}
	return []ssh.AuthMethod{ssh.PublicKeys(o.signers...), ssh.KeyboardInteractive(kbd)}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
