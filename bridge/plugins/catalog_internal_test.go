package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/local"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/simbackend"
)

// TestBuiltinCapabilitiesDeclared: what each built-in declares in the
// catalog is what its value implements, so a declaration can neither hide a
// capability nor claim one the backend lost.
func TestBuiltinCapabilitiesDeclared(t *testing.T) {
	pushing := simCaps
	pushing.Push = true
	for _, c := range []struct {
		name string
		b    backends.Backend
		want backends.Capabilities
	}{
		{"slurm", (*slurm.Backend)(nil), sshCaps},
		{"pbs", (*pbs.Backend)(nil), sshCaps},
		{"sim", (*simbackend.Site)(nil), simCaps},
		{"local", (*local.Site)(nil), localCaps},
		{"sim plugin", (*SimSite)(nil), pushing},
	} {
		if got := backends.CapabilitiesOf(c.b); got != c.want {
			t.Errorf("%s implements %+v, the catalog declares %+v", c.name, got, c.want)
		}
	}
	if got := backends.CapabilitiesOf(slurmBackend{}); got != sshCaps {
		t.Errorf("slurm as the catalog hands it out: %+v, want %+v", got, sshCaps)
	}
	if got := backends.CapabilitiesOf(localBackend{}); got != localCaps {
		t.Errorf("local as the catalog hands it out: %+v, want %+v", got, localCaps)
	}
	if got := backends.CapabilitiesOf(pbsBackend{}); got != sshCaps {
		t.Errorf("pbs as the catalog hands it out: %+v, want %+v", got, sshCaps)
	}
	for _, n := range BuiltinBackends() {
		if _, err := BuiltinCapabilities(n); err != nil {
			t.Error(err)
		}
	}
}

// TestIsolatedResolvesAsPredicted: a built-in served out of process (its
// factory behind a real gRPC Configure) builds from exactly the
// configuration Resolve says it will, for every built-in.
func TestIsolatedResolvesAsPredicted(t *testing.T) {
	cfg := BackendConfig{Name: "s1", Nodes: 3, CoresPerNode: 4, H: 1.5, MemPerNode: 1 << 30, GPUsPerNode: 2,
		Partition: "p", Account: "acct", RemoteDir: "/scratch", BinDir: "/opt/pbs/bin",
		SSH: &SSHConfig{Host: "login", Port: 2222, User: "u", KeyFiles: []string{"/k"}, KnownHosts: []string{"/kh"},
			Agent: true, InsecureIgnoreHostKey: true, MaxSessions: 3},
		Staging: &StagingConfig{MaxFileSize: 10, MaxJobBytes: 20, MinRate: 30, MinTime: time.Minute},
		Sim:     &SimConfig{Epoch: time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC), Seed: 9},
		Options: []byte(`{"x":1}`)}
	for _, name := range BuiltinBackends() {
		t.Run(name, func(t *testing.T) {
			k := builtinBackends[name]
			var got *Resolved
			open := k.open
			k.open = func(ctx context.Context, r *Resolved, engine *simbackend.Engine) (backends.Backend, error) {
				got = r
				if engine != nil {
					t.Error("a built-in out of process was given the host's engine")
				}
				return openSim(ctx, &Resolved{Sim: &simbackend.SiteConfig{Name: r.Config.Name, Nodes: 1}, SimEngine: &defaultSim}, nil)
			}
			defer func() { k.open = open }()
			c := cfg
			c.Kind = name
			if name == "local" {
				c.SSH = nil // a local site has none
			}
			f, err := BuiltinBackend(name)
			if err != nil {
				t.Fatal(err)
			}
			TestBackend(t, f, c)
			want, err := Resolve(BackendSpec{Config: c, Builtin: name, Isolate: true})
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("the served factory did not build")
			}
			got.Mode = want.Mode // the plugin side does not know its mode
			if g, w := stripLoggers(*got), stripLoggers(*want); !reflect.DeepEqual(g, w) {
				t.Errorf("served:\n%+v\nResolve said:\n%+v", g, w)
			}
			if name != "sim" && name != "local" && (got.SSH == nil || got.SSH.User != "u" || !got.SSH.UseAgent) {
				t.Errorf("ssh not resolved: %+v", got.SSH)
			}
		})
	}
}

// stripLoggers zeroes the loggers (a fresh *slog.Logger on each side).
func stripLoggers(r Resolved) Resolved {
	if r.SSH != nil {
		s := *r.SSH
		s.Logger = nil
		r.SSH = &s
	}
	if r.Slurm != nil {
		s := *r.Slurm
		s.Logger = nil
		r.Slurm = &s
	}
	if r.PBS != nil {
		s := *r.PBS
		s.Logger = nil
		r.PBS = &s
	}
	if r.Local != nil {
		s := *r.Local
		s.Logger = nil
		r.Local = &s
	}
	return r
}

// TestBuildInProcessSimOnSharedEngine: in process a simulated site lives on
// the host's engine as a plain simbackend.Site (the broker drives the
// engine); without one it gets its own, as the sim plugin has.
func TestBuildInProcessSimOnSharedEngine(t *testing.T) {
	e := simbackend.NewEngine(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 1)
	spec := BackendSpec{Builtin: "sim", Config: BackendConfig{Name: "a", Kind: "sim", Nodes: 4, MemPerNode: 1 << 30, GPUsPerNode: 2}}
	b, c, err := Build(context.Background(), spec, BuildOptions{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		t.Errorf("a simulated site has nothing to close, got %T", c)
	}
	site, ok := b.(*simbackend.Site)
	if !ok {
		t.Fatalf("in process on the shared engine: %T, want *simbackend.Site", b)
	}
	info, err := site.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Nodes != 4 || info.MemPerNode != 1<<30 || info.GPUsPerNode != 2 {
		t.Errorf("info %+v: nodes, memory and GPUs per node not as configured", info)
	}
	b, _, err = Build(context.Background(), spec, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.(*SimSite); !ok {
		t.Fatalf("in process with no engine: %T, want *SimSite", b)
	}
}

// TestSiteConfigErrors: a site no backend can be built from is refused
// before any I/O, as backends.ErrInvalidSpec (so the wire keeps it), with a
// message about the site.
func TestSiteConfigErrors(t *testing.T) {
	for _, c := range []struct {
		spec BackendSpec
		want string
	}{
		{BackendSpec{Builtin: "slurm", Config: BackendConfig{Name: "a", Kind: "slurm"}}, "site a: a slurm site needs an ssh section"},
		{BackendSpec{Builtin: "pbs", Isolate: true, Config: BackendConfig{Name: "b", Kind: "pbs"}}, "site b: a pbs site needs an ssh section"},
		{BackendSpec{Builtin: "slurm", Config: BackendConfig{Name: "c", SSH: &SSHConfig{Host: "h"}, Staging: &StagingConfig{MinRate: -1}}}, "site c: negative staging limit"},
	} {
		_, err := Resolve(c.spec)
		if !errors.Is(err, backends.ErrInvalidSpec) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "job spec") {
			t.Errorf("%+v: %v, want ErrInvalidSpec saying %q", c.spec, err, c.want)
		}
	}
	if _, err := Resolve(BackendSpec{Builtin: "lsf", Config: BackendConfig{Name: "d"}}); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("an unknown built-in: %v, want ErrUnknownPlugin", err)
	}
	e := simbackend.NewEngine(time.Now(), 1)
	if _, _, err := Build(context.Background(), BackendSpec{Builtin: "sim", Config: BackendConfig{Name: "e"}}, BuildOptions{Engine: e}); !errors.Is(err, backends.ErrInvalidSpec) || !strings.Contains(err.Error(), "nodes must be >= 1") {
		t.Errorf("a simulated site without nodes: %v", err)
	}
}

// fillAll gives every exported leaf of v (a struct; pointers to structs
// are allocated) a non-zero value of its own.
func fillAll(t *testing.T, v reflect.Value, n *int) {
	for i := 0; i < v.NumField(); i++ {
		f, fv := v.Type().Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		*n++
		switch {
		case f.Type == reflect.TypeOf(time.Time{}):
			fv.Set(reflect.ValueOf(time.Date(2026, 1, 1, 0, 0, *n, 0, time.UTC)))
		case f.Type == reflect.TypeOf(json.RawMessage(nil)):
			fv.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"k":%d}`, *n))))
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			fv.Set(reflect.New(f.Type.Elem()))
			fillAll(t, fv.Elem(), n)
		case f.Type.Kind() == reflect.String:
			fv.SetString(fmt.Sprintf("v%d", *n))
		case f.Type.Kind() == reflect.Bool:
			fv.SetBool(true)
		case f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Int64:
			fv.SetInt(int64(*n))
		case f.Type.Kind() >= reflect.Uint && f.Type.Kind() <= reflect.Uint64:
			fv.SetUint(uint64(*n))
		case f.Type.Kind() == reflect.Float64:
			fv.SetFloat(float64(*n) + 0.5)
		case f.Type == reflect.TypeOf([]string(nil)):
			fv.Set(reflect.ValueOf([]string{fmt.Sprintf("v%d", *n)}))
		default:
			t.Fatalf("%s: teach fillAll a %s", f.Name, f.Type)
		}
	}
}

// TestBackendConfigSurvivesTheWire: every field of BackendConfig, set,
// arrives unchanged at a plugin's factory through a real gRPC Configure,
// so a field the host knows cannot be lost on the way to a backend out of
// process (as an isolated site's account once was).
func TestBackendConfigSurvivesTheWire(t *testing.T) {
	var sent BackendConfig
	n := 0
	fillAll(t, reflect.ValueOf(&sent).Elem(), &n)
	var got *BackendConfig
	TestBackend(t, func(ctx context.Context, raw []byte) (backends.Backend, error) {
		c, err := decodeConfig(raw)
		got = c
		if err != nil {
			return nil, err
		}
		return openSim(ctx, &Resolved{Sim: &simbackend.SiteConfig{Name: c.Name, Nodes: 1}, SimEngine: &defaultSim}, nil)
	}, sent)
	if got == nil || !reflect.DeepEqual(*got, sent) {
		t.Errorf("sent  %+v\nreceived %+v", sent, got)
	}
}
