package transport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// credentials holds the signers offered to the server. Key files are read
// once at Dial; the agent is asked at every connect (its keys may change).
type credentials struct {
	fileSigners []ssh.Signer
	files       []string
	useAgent    bool
}

func loadCredentials(cfg Config) (*credentials, error) {
	cr := &credentials{useAgent: cfg.UseAgent}
	for _, f := range cfg.KeyFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: reading key file for %s: %w", ErrAuth, cfg.target(), err)
		}
		s, err := ssh.ParsePrivateKey(pem)
		if err != nil {
			var pm *ssh.PassphraseMissingError
			if errors.As(err, &pm) {
				return nil, fmt.Errorf("%w: key file %s is protected by a passphrase; gridsub does not prompt for "+
					"passphrases: load it into ssh-agent (ssh-add %s) and set UseAgent", ErrAuth, f, f)
			}
			return nil, fmt.Errorf("%w: key file %s is not a private key ssh can read: %w", ErrAuth, f, err)
		}
		cr.fileSigners = append(cr.fileSigners, s)
		cr.files = append(cr.files, f)
	}
	return cr, nil
}

// authMethod returns one publickey method offering the key-file keys and
// then the agent's keys (x/crypto tries each method name only once, so they
// must be one method), a closer for the agent connection, and a description
// of what is offered for error messages.
func (cr *credentials) authMethod() (ssh.AuthMethod, func(), string) {
	var agentConn net.Conn
	var agentErr error
	var agentSigners []ssh.Signer
	if cr.useAgent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		if sock == "" {
			agentErr = errors.New("SSH_AUTH_SOCK is not set")
		} else if agentConn, agentErr = net.Dial("unix", sock); agentErr == nil {
			agentSigners, agentErr = agent.NewClient(agentConn).Signers()
		}
	}
	var desc []string
	if len(cr.files) > 0 {
		desc = append(desc, "publickey from key files "+strings.Join(cr.files, ", "))
	}
	if cr.useAgent {
		if agentErr != nil {
			desc = append(desc, fmt.Sprintf("ssh-agent (unusable: %v)", agentErr))
		} else {
			desc = append(desc, fmt.Sprintf("publickey from ssh-agent (%d keys)", len(agentSigners)))
		}
	}
	signers := append(append([]ssh.Signer(nil), cr.fileSigners...), agentSigners...)
	closer := func() {
		if agentConn != nil {
			agentConn.Close()
		}
	}
	return ssh.PublicKeys(signers...), closer, strings.Join(desc, "; ")
}
