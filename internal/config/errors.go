package config

import (
	"errors"
	"strings"
)

// Sentinel errors. Every *Error wraps one of them.
var (
	// ErrRead: the configuration file cannot be read or is not valid YAML.
	ErrRead = errors.New("cannot read configuration")
	// ErrUnknownKey: a key the configuration schema does not define.
	ErrUnknownKey = errors.New("unknown configuration key")
	// ErrInvalid: a value of the wrong type or out of range.
	ErrInvalid = errors.New("invalid configuration value")
	// ErrSecret: a key or value that looks like a secret (password,
	// passphrase, token, an inline private key). Secrets never belong in a
	// configuration file.
	ErrSecret = errors.New("secret in configuration")
	// ErrMissingEnv: a ${VAR} reference to an environment variable that is
	// not set.
	ErrMissingEnv = errors.New("environment variable not set")
)

// Error is one problem in a configuration: the source (file name), the key
// path (e.g. "sites[1].ssh.port") and what is wrong and what would be valid.
type Error struct {
	Source string
	Key    string
	Msg    string
	Err    error // the sentinel
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem found in one configuration; Load returns it when
// anything is wrong. errors.Is and errors.As see its members.
type Errors []*Error

func (l Errors) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes the members to errors.Is and errors.As.
func (l Errors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func (l Errors) asError() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
