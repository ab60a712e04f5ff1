package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/policy/trust"
)

// PolicyPluginPrefix starts a policy reference that names a plugin rather
// than a built-in: plugin:builtin:NAME (the built-in run out of process by
// gridsub itself) or plugin:/path/to/exe ARGS (an external executable,
// checksummed).
const PolicyPluginPrefix = "plugin:"

// ErrBadRef: a policy reference cannot name anything (a plugin: reference
// without an executable, an external plugin without its checksum).
var ErrBadRef = errors.New("bad policy reference")

// PolicySpec says which policy of one kind to build, and how, in the one
// way every kind is built: a built-in by name in process, or a plugin.
type PolicySpec struct {
	// Kind is the extension point (KindPlanner, KindFeasibility, ...;
	// PolicyKinds lists them).
	Kind string
	// Ref names the policy: a built-in's name (in process), or a
	// PolicyPluginPrefix reference.
	Ref string
	// SHA256 is an external plugin executable's checksum (hex), verified
	// before every start; required for plugin:/path.
	SHA256 string
	// CallTimeout bounds one call to a plugin that has no ctx of its own
	// (0: the kind's default).
	CallTimeout time.Duration
	// Input is what a built-in may read from the host.
	Input PolicyInput
	// Self finds the gridsub executable that serves a built-in out of
	// process (nil: os.Executable).
	Self func() (string, error)
	// Env is a plugin's whole environment ("KEY=value").
	Env []string
	// Logger gets a plugin's log lines with plugin=LogName.
	Logger  *slog.Logger
	LogName string
}

// PolicyInput is what the host knows that a built-in policy may need.
type PolicyInput struct {
	// Areas is each site's local area (trust-min-min reads it); nil when
	// the policy is served without the broker's sites.
	Areas map[string]string
}

// PolicyPlugin is a policy running out of process: its process, and the
// value of the kind's interface that reaches it (Policy).
type PolicyPlugin interface {
	Policy() any
	Pid() int
	Exited() bool
	Close() error
}

// PolicyInstance is a built policy.
type PolicyInstance struct {
	Kind string
	Ref  string // as given
	Mode string // ModeInProcess, ModeIsolated or ModeExternal
	Impl string // the built-in's name or the executable
	// Value implements the kind's interface (policy.Planner for
	// KindPlanner).
	Value any
	// Plugin is the process behind Value; nil in process.
	Plugin PolicyPlugin
}

// PolicyKind is how the catalog builds one kind of policy.
type PolicyKind struct {
	// Builtin returns the built-in called name, in process.
	Builtin func(name string, in PolicyInput) (any, error)
	// Load starts a plugin reference out of process; ref is parsed
	// (Builtin set for plugin:builtin:NAME, else Path and Args). The
	// package holding the kind's gRPC shims installs it
	// (RegisterPolicyLoader): it imports this package, which therefore
	// cannot import it.
	Load func(ctx context.Context, spec PolicySpec, ref PolicyRef) (PolicyPlugin, error)
}

// PolicyRef is a parsed plugin reference.
type PolicyRef struct {
	Builtin string   // NAME of plugin:builtin:NAME
	Path    string   // the executable of plugin:/path ARGS
	Args    []string // its arguments
}

var (
	policyMu    sync.RWMutex
	policyKinds = map[string]*PolicyKind{
		KindPlanner: {Builtin: builtinPlanner},
	}
)

// RegisterPolicyLoader installs how plugins of kind are started; the
// kind's shim package calls it from init.
func RegisterPolicyLoader(kind string, load func(context.Context, PolicySpec, PolicyRef) (PolicyPlugin, error)) {
	policyMu.Lock()
	defer policyMu.Unlock()
	k := policyKinds[kind]
	if k == nil {
		k = &PolicyKind{}
		policyKinds[kind] = k
	}
	k.Load = load
}

// PolicyKinds lists the kinds of policy the catalog builds.
func PolicyKinds() []string {
	policyMu.RLock()
	defer policyMu.RUnlock()
	var out []string
	for k := range policyKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func policyKind(kind string) (PolicyKind, error) {
	policyMu.RLock()
	defer policyMu.RUnlock()
	k, ok := policyKinds[kind]
	if !ok {
		return PolicyKind{}, fmt.Errorf("%w: no policy kind %q (kinds: %v)", ErrUnknownPlugin, kind, PolicyKinds())
	}
	return *k, nil
}

// BuiltinPolicy returns the built-in policy of kind called name, in
// process; the error of an unknown name is the kind's own (the policy
// registry's for a planner, naming the valid ones).
func BuiltinPolicy(kind, name string, in PolicyInput) (any, error) {
	k, err := policyKind(kind)
	if err != nil {
		return nil, err
	}
	if k.Builtin == nil {
		return nil, fmt.Errorf("%w: the %s kind has no built-ins", ErrUnknownPlugin, kind)
	}
	return k.Builtin(name, in)
}

// ParsePolicyRef parses a policy reference; ok is false for a built-in's
// bare name.
func ParsePolicyRef(ref string) (r PolicyRef, ok bool, err error) {
	rest, ok := strings.CutPrefix(ref, PolicyPluginPrefix)
	if !ok {
		return r, false, nil
	}
	if b, isBuiltin := strings.CutPrefix(rest, "builtin:"); isBuiltin {
		if b == "" {
			return r, true, fmt.Errorf("%w: %q names no built-in planner or policy: write plugin:builtin:NAME", ErrBadRef, ref)
		}
		return PolicyRef{Builtin: b}, true, nil
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return r, true, fmt.Errorf("%w: %q names no executable: write plugin:/path/to/exe ARGS, or plugin:builtin:NAME", ErrBadRef, ref)
	}
	return PolicyRef{Path: f[0], Args: f[1:]}, true, nil
}

// Policy builds the policy spec names, of any kind, in the one way: a
// built-in by name in process; plugin:builtin:NAME the built-in out of
// process (gridsub re-executes itself); plugin:/path ARGS an external
// executable whose SHA-256 must match spec.SHA256. Errors about the
// reference itself (an unknown kind or name, a malformed reference) are
// returned before anything starts.
func Policy(ctx context.Context, spec PolicySpec) (*PolicyInstance, error) {
	k, err := policyKind(spec.Kind)
	if err != nil {
		return nil, err
	}
	ref, isPlugin, err := ParsePolicyRef(spec.Ref)
	if err != nil {
		return nil, err
	}
	inst := &PolicyInstance{Kind: spec.Kind, Ref: spec.Ref}
	if !isPlugin {
		v, err := BuiltinPolicy(spec.Kind, spec.Ref, spec.Input)
		if err != nil {
			return nil, err
		}
		inst.Mode, inst.Impl, inst.Value = ModeInProcess, spec.Ref, v
		return inst, nil
	}
	if ref.Builtin != "" {
		// Served without the host's input: a built-in that needs it does
		// not run out of process.
		if _, err := BuiltinPolicy(spec.Kind, ref.Builtin, PolicyInput{}); err != nil {
			return nil, err
		}
		inst.Mode, inst.Impl = ModeIsolated, ref.Builtin
	} else {
		if spec.SHA256 == "" {
			return nil, fmt.Errorf("%w: an external %s plugin needs its executable's sha256 (sha256sum %s)", ErrBadRef, spec.Kind, ref.Path)
		}
		inst.Mode, inst.Impl = ModeExternal, ref.Path
	}
	if k.Load == nil {
		return nil, fmt.Errorf("%w: this gridsub cannot run a %s policy out of process (no plugin protocol for the kind)", ErrUnknownPlugin, spec.Kind)
	}
	p, err := k.Load(ctx, spec, ref)
	if err != nil {
		return nil, err
	}
	inst.Plugin, inst.Value = p, p.Policy()
	return inst, nil
}

// builtinPlanner is a built-in planner by name: the policy registry's,
// or trust-min-min over the sites' areas (only with them).
func builtinPlanner(name string, in PolicyInput) (any, error) {
	if name == trust.PlannerName && in.Areas != nil {
		return &trust.Planner{Areas: in.Areas}, nil
	}
	return registry.ByName(name)
}
