package policyrpc

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

// DefaultCallTimeout bounds one call when the plugin's Config gives none.
const DefaultCallTimeout = 30 * time.Second

// base is what every kind's client shares: the plugin's done context, the
// name and version its Info gave, the call bound, and the last failure of
// a method that has no error to return.
type base struct {
	kind    string
	name    string
	version string
	done    context.Context // cancelled when the plugin process exits
	timeout time.Duration

	mu   sync.Mutex
	last error
}

// Name implements the policy interface: the name the plugin's policy gave.
func (b *base) Name() string { return b.name }

// Version is the version the plugin reported.
func (b *base) Version() string { return b.version }

// Err is the failure of the last call whose method has no error result
// (Trust.Decay, Tiering's methods, most of a ReservationBook's), nil after
// it succeeded: the method answered its safe value instead.
func (b *base) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

func (b *base) note(err error) {
	b.mu.Lock()
	b.last = err
	b.mu.Unlock()
}

// call runs f bounded by the call timeout joined with the plugin's done
// context and maps a failed RPC as PLUGIN-STYLE §5 says (wire.CallError).
func (b *base) call(method string, f func(context.Context) error) error {
	if b.done.Err() != nil {
		return fmt.Errorf("plugin %s: %s: %w", b.name, method, wire.ErrPluginExited)
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	joined, stop := wire.Join(ctx, b.done)
	defer stop()
	return wire.CallError(b.name, method, ctx, joined, f(joined))
}

// remote is the client's side of a reply's PolicyError.
func (b *base) remote(method string, e *pb.PolicyError) error {
	if e == nil {
		return nil
	}
	kinds := make([]wire.Kind, len(e.GetKinds()))
	for i, k := range e.GetKinds() {
		kinds[i] = wire.Kind(k)
	}
	return wire.PolicyCodec.Decode(b.name, method, kinds, e.GetMessage())
}

// bad is a reply the client cannot decode: a broken plugin, not retryable.
func (b *base) bad(method string, err error) error {
	return fmt.Errorf("plugin %s: %s: %w: bad reply: %v", b.name, method, wire.ErrTransport, err)
}

// errorToProto is the server's side: every kind err matches, and its text.
func errorToProto(err error) *pb.PolicyError {
	if err == nil {
		return nil
	}
	ks := wire.PolicyCodec.KindsOf(err)
	out := &pb.PolicyError{Kinds: make([]pb.PolicyErrorKind, len(ks)), Message: err.Error()}
	for i, k := range ks {
		out.Kinds[i] = pb.PolicyErrorKind(k)
	}
	return out
}

// dial is the host's side of a dispense: it asks the plugin's Info (bounded
// by timeout and done) and checks the plugin serves kind.
func dial(done context.Context, kind string, timeout time.Duration, info func(context.Context) (*pb.PolicyInfo, error)) (*base, error) {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	b := &base{kind: kind, name: "(" + kind + " plugin)", done: done, timeout: timeout}
	var in *pb.PolicyInfo
	if err := b.call("Info", func(ctx context.Context) (err error) {
		in, err = info(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	switch {
	case in.GetName() == "":
		return nil, fmt.Errorf("%s plugin: Info: the plugin gave no name", kind)
	case in.GetKind() != kind:
		return nil, fmt.Errorf("%s plugin %s: Info: it serves %q, not %q", kind, in.GetName(), in.GetKind(), kind)
	case in.GetProtocol() != plugins.ProtocolVersion:
		return nil, fmt.Errorf("%s plugin %s: %w: it speaks %d, this gridsub %d", kind, in.GetName(), plugins.ErrIncompatible, in.GetProtocol(), plugins.ProtocolVersion)
	}
	b.name, b.version = in.GetName(), in.GetVersion()
	return b, nil
}

// info is the server's Info answer.
func info(kind, name, version string) *pb.PolicyInfo {
	return &pb.PolicyInfo{Name: name, Kind: kind, Protocol: plugins.ProtocolVersion, Version: version}
}

// invalid is the server's answer to a request it cannot decode: the host
// sent what no policy can read (InvalidArgument, which the client maps to
// wire.ErrTransport naming the method).
func invalid(err error) error { return status.Error(codes.InvalidArgument, err.Error()) }
