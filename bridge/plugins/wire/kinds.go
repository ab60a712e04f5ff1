package wire

import (
	"context"
	"errors"
	"strings"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
)

// Kind is one class of domain error on the wire. The numbers are those of
// the protobuf enum BackendErrorKind; 0 is "unspecified" and never sent.
type Kind int32

// The kinds. Append only: a number once used keeps its meaning.
const (
	KindUnspecified     Kind = 0
	KindUnknownJob      Kind = 1
	KindInvalidSpec     Kind = 2
	KindUnavailable     Kind = 3
	KindRejected        Kind = 4
	KindBadOutput       Kind = 5
	KindUnsupported     Kind = 6
	KindHostKeyChanged  Kind = 7
	KindHostKeyUnknown  Kind = 8
	KindHostKeyRevoked  Kind = 9
	KindAuth            Kind = 10
	KindSessionLimit    Kind = 11
	KindPathEscape      Kind = 12
	KindClosed          Kind = 13
	KindCanceled        Kind = 14
	KindDeadline        Kind = 15
	KindInternal        Kind = 16
	KindSpecialFile     Kind = 17
	KindTooLarge        Kind = 18
	KindTransferTimeout Kind = 19
	KindOutputLimit     Kind = 20
	KindOutcomeUnknown  Kind = 21
	KindNotSent         Kind = 22
	KindNeedsLogin      Kind = 23
	KindHostCertInvalid Kind = 24
	KindSSHConfig       Kind = 25
)

// Row is one line of the table: a kind, its name on the wire (the enum
// value's suffix) and the sentinel it stands for (nil for INTERNAL).
type Row struct {
	Kind     Kind
	Name     string
	Sentinel error
	// Qualified is the sentinel's Go name ("backends.ErrUnknownJob"), for
	// the test that checks every sentinel has a row.
	Qualified string
}

// Table is every kind the protocol knows, in number order.
var Table = []Row{
	{KindUnknownJob, "UNKNOWN_JOB", backends.ErrUnknownJob, "backends.ErrUnknownJob"},
	{KindInvalidSpec, "INVALID_SPEC", backends.ErrInvalidSpec, "backends.ErrInvalidSpec"},
	{KindUnavailable, "UNAVAILABLE", backends.ErrUnavailable, "backends.ErrUnavailable"},
	{KindRejected, "REJECTED", backends.ErrRejected, "backends.ErrRejected"},
	{KindBadOutput, "BAD_OUTPUT", backends.ErrBadOutput, "backends.ErrBadOutput"},
	{KindUnsupported, "UNSUPPORTED", backends.ErrUnsupported, "backends.ErrUnsupported"},
	{KindHostKeyChanged, "HOST_KEY_CHANGED", transport.ErrHostKeyChanged, "transport.ErrHostKeyChanged"},
	{KindHostKeyUnknown, "HOST_KEY_UNKNOWN", transport.ErrHostKeyUnknown, "transport.ErrHostKeyUnknown"},
	{KindHostKeyRevoked, "HOST_KEY_REVOKED", transport.ErrHostKeyRevoked, "transport.ErrHostKeyRevoked"},
	{KindAuth, "AUTH", transport.ErrAuth, "transport.ErrAuth"},
	{KindSessionLimit, "SESSION_LIMIT", transport.ErrSessionLimit, "transport.ErrSessionLimit"},
	{KindPathEscape, "PATH_ESCAPE", transport.ErrPathEscape, "transport.ErrPathEscape"},
	{KindClosed, "CLOSED", transport.ErrClosed, "transport.ErrClosed"},
	{KindCanceled, "CANCELED", context.Canceled, "context.Canceled"},
	{KindDeadline, "DEADLINE", context.DeadlineExceeded, "context.DeadlineExceeded"},
	{KindInternal, "INTERNAL", nil, ""},
	{KindSpecialFile, "SPECIAL_FILE", transport.ErrSpecialFile, "transport.ErrSpecialFile"},
	{KindTooLarge, "TOO_LARGE", transport.ErrTooLarge, "transport.ErrTooLarge"},
	{KindTransferTimeout, "TRANSFER_TIMEOUT", transport.ErrTransferTimeout, "transport.ErrTransferTimeout"},
	{KindOutputLimit, "OUTPUT_LIMIT", transport.ErrOutputLimit, "transport.ErrOutputLimit"},
	{KindOutcomeUnknown, "OUTCOME_UNKNOWN", backends.ErrOutcomeUnknown, "backends.ErrOutcomeUnknown"},
	{KindNotSent, "NOT_SENT", transport.ErrNotSent, "transport.ErrNotSent"},
	{KindNeedsLogin, "NEEDS_LOGIN", backends.ErrNeedsLogin, "backends.ErrNeedsLogin"},
	{KindHostCertInvalid, "HOST_CERT_INVALID", transport.ErrHostCertInvalid, "transport.ErrHostCertInvalid"},
	{KindSSHConfig, "SSH_CONFIG", transport.ErrSSHConfig, "transport.ErrSSHConfig"},
}

func row(k Kind) (Row, bool) {
	if k >= 1 && int(k) <= len(Table) && Table[k-1].Kind == k {
		return Table[k-1], true
	}
	return Row{}, false
}

// KindsOf returns every kind whose sentinel err matches (errors.Is), in
// table order; an error that matches none is INTERNAL. nil has no kinds.
func KindsOf(err error) []Kind {
	if err == nil {
		return nil
	}
	var out []Kind
	for _, r := range Table {
		if r.Sentinel != nil && errors.Is(err, r.Sentinel) {
			out = append(out, r.Kind)
		}
	}
	if len(out) == 0 {
		out = append(out, KindInternal)
	}
	return out
}

// Sentinels returns the sentinels of kinds, skipping INTERNAL and kinds this
// build does not know (a newer plugin's): those still fail, just without an
// identity to test for.
func Sentinels(kinds []Kind) []error {
	var out []error
	for _, k := range kinds {
		if r, ok := row(k); ok && r.Sentinel != nil {
			out = append(out, r.Sentinel)
		}
	}
	return out
}

// RemoteError is an error a plugin returned. It prints as the plugin's
// message and the plugin that said it, and unwraps to the sentinels of its
// kinds, so errors.Is and backends.Retryable answer as they did inside the
// plugin.
type RemoteError struct {
	Plugin string // the plugin's name (the site or planner it serves)
	Method string // the call that failed ("Submit")
	Msg    string // the plugin's error text
	Kinds  []Kind
	codec  *Codec // the table Kinds index; nil: the backend protocol's (Table)
}

func (e *RemoteError) Error() string {
	var b strings.Builder
	b.WriteString(e.Msg)
	b.WriteString(" (plugin ")
	b.WriteString(e.Plugin)
	b.WriteString(", ")
	b.WriteString(e.Method)
	b.WriteString(")")
	return b.String()
}

// Unwrap yields the sentinels of e's kinds.
func (e *RemoteError) Unwrap() []error {
	if e.codec != nil {
		return e.codec.Sentinels(e.Kinds)
	}
	return Sentinels(e.Kinds)
}

// Decode is the client's side of a reply's error: nil when kinds is empty
// and msg is "", else a *RemoteError.
func Decode(plugin, method string, kinds []Kind, msg string) error {
	if len(kinds) == 0 && msg == "" {
		return nil
	}
	if len(kinds) == 0 {
		kinds = []Kind{KindInternal}
	}
	return &RemoteError{Plugin: plugin, Method: method, Msg: msg, Kinds: kinds}
}
