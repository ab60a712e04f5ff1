package transport

import (
	"context"
	"fmt"

	"github.com/gridsub/gridsub/backends"
)

// Prompter answers what a login asks a person: the questions of a
// keyboard-interactive exchange (a one-time password, a Duo-style "1" for
// a push) and the passphrase of an encrypted key file.
//
// Contract: Prompt returns exactly one answer per question, in order, or
// an error (the person gave up, ctx ended). It may block until the person
// answers; it must give up when ctx ends. The answers are secrets: a
// Prompter never logs or stores them, and the transport keeps none of them
// (a decrypted key stays in memory for the Client's lifetime, as an
// ssh-agent would keep it; a one-time password is used once).
type Prompter interface {
	Prompt(ctx context.Context, c Challenge) ([]string, error)
}

// Challenge is one round of questions.
type Challenge struct {
	// Target is who asks: "user@host:port", with "(hop 1 of 2)" for a jump host.
	Target string `json:"target"`
	// Kind is "keyboard-interactive" or "passphrase".
	Kind        string     `json:"kind"`
	Name        string     `json:"name,omitempty"`
	Instruction string     `json:"instruction,omitempty"`
	Questions   []Question `json:"questions"`
}

// Question is one prompt; Echo is false for secrets (typed without echo).
type Question struct {
	Text string `json:"text"`
	Echo bool   `json:"echo"`
}

// Challenge kinds.
const (
	ChallengeKeyboard   = "keyboard-interactive"
	ChallengePassphrase = "passphrase"
)

// PrompterFunc adapts a function to Prompter.
type PrompterFunc func(ctx context.Context, c Challenge) ([]string, error)

// Prompt calls f.
func (f PrompterFunc) Prompt(ctx context.Context, c Challenge) ([]string, error) { return f(ctx, c) }

// ErrNeedsLogin is backends.ErrNeedsLogin as the transport returns it:
// authentication needs a person (the server asked keyboard-interactive
// questions, or a key file is encrypted and its passphrase was not given
// yet) and no Prompter is at hand. A Client in that state sends nothing
// and dials nothing (no failed-login storm, no push notifications) until
// Client.Login succeeds. Also matches backends.ErrUnavailable.
var ErrNeedsLogin = fmt.Errorf("%w: %w", backends.ErrNeedsLogin, backends.ErrUnavailable)

// errNoPrompter is returned from inside an authentication callback when a
// question came and there is nobody to ask.
type errNoPrompter struct{ what string }

func (e *errNoPrompter) Error() string { return e.what + " and no terminal to ask on" }
