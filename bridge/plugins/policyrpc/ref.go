package policyrpc

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/policy/registry"
)

// A policy name of any kind is written as a planner's is
// (plannerrpc.RefPrefix):
//
//	NAME                              the built-in NAME, in process
//	plugin:/path/to/exe [ARG...]      an executable serving the kind
//	plugin:builtin:NAME               the built-in NAME out of process: the
//	                                  gridsub binary re-executed as
//	                                  `gridsub plugin serve KIND NAME`

// RefConfig is how to start the plugin r names for kind; self finds the
// gridsub executable for a built-in (os.Executable when nil). The caller
// adds SHA256, timeouts and logging.
func RefConfig(kind string, r plannerrpc.Ref, self func() (string, error)) (Config, error) {
	if r.Builtin == "" {
		return Config{Path: r.Path, Args: r.Args}, nil
	}
	if self == nil {
		self = os.Executable
	}
	exe, err := self()
	if err != nil {
		return Config{}, fmt.Errorf("finding the gridsub executable to run %s: %w", r, err)
	}
	return Config{Path: exe, Args: []string{"plugin", "serve", kind, r.Builtin}}, nil
}

// Open returns the policy of kind a configuration names: a built-in in
// process (closer nil), or a plugin started from a plugin: reference
// (base gives its checksum, timeouts, logging and the gridsub executable
// for plugin:builtin:; its Path and Args are replaced). It is the one call a wiring point needs per extension point;
// the value is a policy.Feasibility, Admission, Trust, Tiering, Remap or Order by
// kind, and the closer stops the plugin.
func Open(ctx context.Context, kind, name string, base Config) (any, io.Closer, error) {
	r, isRef, err := plannerrpc.ParseRef(name)
	if err != nil {
		return nil, nil, fmt.Errorf("%s policy: %w", kind, err)
	}
	if !isRef {
		impl, err := builtin(kind, name)
		return impl, nil, err
	}
	if r.Builtin != "" {
		if _, err := builtin(kind, r.Builtin); err != nil {
			return nil, nil, err
		}
	}
	var self func() (string, error)
	if base.Gridsub != "" {
		self = func() (string, error) { return base.Gridsub, nil }
	}
	cfg, err := RefConfig(kind, r, self)
	if err != nil {
		return nil, nil, err
	}
	base.Path, base.Args = cfg.Path, cfg.Args
	p, err := Load(ctx, kind, base)
	if err != nil {
		return nil, nil, err
	}
	return p.Policy(), p, nil
}

// Builtin is the built-in policy of kind named name (policy/registry; ""
// is the kind's default); an unknown name wraps plugins.ErrUnknownPlugin
// and lists the valid ones.
func Builtin(kind, name string) (any, error) { return builtin(kind, name) }

// builtin is the built-in of kind named name (policy/registry; "" is the
// kind's default).
func builtin(kind, name string) (any, error) {
	var impl any
	var err error
	switch kind {
	case plugins.KindFeasibility:
		impl, err = registry.Feasibility(name)
	case plugins.KindAdmission:
		impl, err = registry.Admission(name)
	case plugins.KindTrust:
		impl, err = registry.Trust(name)
	case plugins.KindTiering:
		impl, err = registry.Tiering(name)
	case plugins.KindRemap:
		impl, err = registry.Remap(name)
	case plugins.KindOrder:
		impl, err = registry.Order(name)
	default:
		return nil, fmt.Errorf("%w: no policy kind %q", plugins.ErrUnknownPlugin, kind)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plugins.ErrUnknownPlugin, err)
	}
	return impl, nil
}
