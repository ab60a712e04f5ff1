package config

import (
	"errors"

	"github.com/gridsub/gridsub/bridge/jobfile"
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

// Error is one problem in a configuration: the source file (File), the key
// path (Field, e.g. "sites[1].ssh.port"), what is wrong and what would be
// valid (Msg), and the sentinel it wraps (Err). It is the positioned error
// of every YAML language gridsub reads (jobfile.FieldError).
type Error = jobfile.FieldError

// Errors is every problem found in one configuration; Load returns it when
// anything is wrong. errors.Is and errors.As see its members.
type Errors = jobfile.ErrorList
