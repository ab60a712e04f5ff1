package wire_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gridsub/gridsub/backends"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

// sentinelNames parses file and returns the names of the Err* variables
// declared in its top-level var blocks.
func sentinelNames(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
					out = append(out, n.Name)
				}
			}
		}
	}
	return out
}

// TestEverySentinelHasAKind: a sentinel added to backends or transport
// without a row here would lose its identity across the plugin boundary.
func TestEverySentinelHasAKind(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..", "..")
	have := map[string]bool{}
	for _, r := range wire.Table {
		have[r.Qualified] = true
	}
	for pkg, file := range map[string]string{
		"backends":  filepath.Join(root, "backends", "backends.go"),
		"transport": filepath.Join(root, "backends", "transport", "errors.go"),
	} {
		names := sentinelNames(t, file)
		if len(names) < 5 {
			t.Fatalf("%s: found only %v; has the var block moved?", file, names)
		}
		for _, n := range names {
			if !have[pkg+"."+n] {
				t.Errorf("%s.%s has no row in wire.Table: add a kind (and the enum value in proto/v1/backend.proto)", pkg, n)
			}
		}
	}
}

// TestKindsMatchTheEnum: the table's numbers and names are the protobuf
// enum's, and the table is in number order with no gaps.
func TestKindsMatchTheEnum(t *testing.T) {
	if len(pb.BackendErrorKind_name) != len(wire.Table)+1 {
		t.Errorf("the enum has %d values, the table %d kinds (+ UNSPECIFIED)", len(pb.BackendErrorKind_name), len(wire.Table))
	}
	for i, r := range wire.Table {
		if int(r.Kind) != i+1 {
			t.Errorf("row %d has kind %d", i, r.Kind)
		}
		if got := pb.BackendErrorKind_name[int32(r.Kind)]; got != "BACKEND_ERROR_KIND_"+r.Name {
			t.Errorf("kind %d is %s in the enum, %s in the table", r.Kind, got, r.Name)
		}
	}
}

func TestKindsOfAndBack(t *testing.T) {
	err := errors.Join(errors.New("a"), wire.ErrPluginExited)
	ks := wire.KindsOf(err)
	if len(ks) != 1 || ks[0] != wire.KindUnavailable {
		t.Errorf("KindsOf(plugin exited) = %v, want [UNAVAILABLE]", ks)
	}
	if ks := wire.KindsOf(errors.New("x")); len(ks) != 1 || ks[0] != wire.KindInternal {
		t.Errorf("KindsOf(plain) = %v, want [INTERNAL]", ks)
	}
	if wire.KindsOf(nil) != nil {
		t.Error("KindsOf(nil) is not nil")
	}
	// A kind from a newer plugin fails without an identity.
	e := wire.Decode("p", "M", []wire.Kind{99}, "new")
	if e == nil || errors.Is(e, backends.ErrUnavailable) || !strings.Contains(e.Error(), "plugin p") {
		t.Errorf("Decode(unknown kind) = %v", e)
	}
	if wire.Decode("p", "M", nil, "") != nil {
		t.Error("Decode of nothing is an error")
	}
}

func TestCallError(t *testing.T) {
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	if err := wire.CallError("p", "M", cancelled, cancelled, status.Error(codes.Canceled, "x")); !errors.Is(err, context.Canceled) {
		t.Errorf("caller cancelled: %v", err)
	}
	dead, kill := context.WithCancel(bg)
	joined, stop := wire.Join(bg, dead)
	defer stop()
	kill()
	<-joined.Done()
	if err := wire.CallError("p", "M", bg, joined, status.Error(codes.Canceled, "x")); !errors.Is(err, wire.ErrPluginExited) || !backends.Retryable(err) {
		t.Errorf("plugin done: %v", err)
	}
	if err := wire.CallError("p", "M", bg, bg, status.Error(codes.Unavailable, "conn refused")); !errors.Is(err, wire.ErrPluginExited) {
		t.Errorf("Unavailable: %v", err)
	}
	if err := wire.CallError("p", "M", bg, bg, status.Error(codes.Unimplemented, "no")); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Unimplemented: %v", err)
	}
	err := wire.CallError("p", "Submit", bg, bg, status.Error(codes.ResourceExhausted, "too big"))
	if !errors.Is(err, wire.ErrTransport) || backends.Retryable(err) || !strings.Contains(err.Error(), "Submit") || !strings.Contains(err.Error(), "plugin p") {
		t.Errorf("other: %v", err)
	}
}

func TestTimeCodec(t *testing.T) {
	if wire.TimeToWire(time.Time{}) != 0 || !wire.TimeFromWire(0).IsZero() {
		t.Error("zero time does not travel as 0")
	}
	now := time.Date(2026, 5, 6, 7, 8, 9, 10, time.FixedZone("x", 3600))
	if got := wire.TimeFromWire(wire.TimeToWire(now)); !got.Equal(now) {
		t.Errorf("%v came back as %v", now, got)
	}
}
