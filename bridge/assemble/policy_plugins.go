package assemble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
)

// PolicyPlugins says how to start the policy plugins a PolicyNames names
// with a plugin: reference (NAME | plugin:/path ARGS | plugin:builtin:NAME,
// as broker.policy): one checksum per kind (plugin:builtin: needs none:
// it is gridsub itself), and what every Config shares (timeouts, logger,
// the gridsub executable).
type PolicyPlugins struct {
	SHA256 map[string]string // by kind: plugins.KindTrust, ...
	Base   policyrpc.Config
	// Fallback: a plugin that fails for good hands over to its kind's
	// default built-in (policy/registry), as a planner plugin does to
	// broker.fallback_policy.
	Fallback bool
	// OnEvent, when set, is told each restart of a plugin after a failure
	// (EventPolicyRestarted, also logged to Base.Logger) and its switch to
	// the fallback (EventPolicyFallback), with Plugin the kind; it must
	// not block. Base.OnSwitch is replaced.
	OnEvent func(PluginEvent)
}

// The policy plugins' events (PolicyPlugins.OnEvent).
const (
	EventPolicyRestarted = "policy-restarted"
	EventPolicyFallback  = "policy-fallback"
)

// Open builds the policy of each extension point beside the planner from
// its name: a built-in in process, or a plugin started out of process
// from a plugin: reference (checksummed, AutoMTLS, restarted when it
// dies, replaced by the kind's default built-in when it fails for good if
// pp.Fallback). Build calls it with the configuration's names. The closer
// is a *PolicyPluginSet: it stops every plugin started, and its Listings
// are their rows for `gridsub plugins`. On an error the plugins already
// started are stopped; the error names the configuration key, and wraps
// ErrConfig for an unknown name, a malformed reference or a plugin:/path
// without its checksum (the catalog's rule, plugins.Policy).
func (n PolicyNames) Open(ctx context.Context, pp PolicyPlugins) (bridge.Policies, io.Closer, error) {
	var p bridge.Policies
	started := &PolicyPluginSet{}
	for _, x := range []struct {
		kind, key, name string
		set             func(any) bool
	}{
		{plugins.KindFeasibility, "broker.feasibility", n.Feasibility, func(v any) (ok bool) { p.Feasibility, ok = v.(policy.Feasibility); return }},
		{plugins.KindAdmission, "broker.admission", n.Admission, func(v any) (ok bool) { p.Admission, ok = v.(policy.Admission); return }},
		{plugins.KindTrust, "broker.trust", n.Trust, func(v any) (ok bool) { p.Trust, ok = v.(policy.Trust); return }},
		{plugins.KindTiering, "broker.tiering", n.Tiering, func(v any) (ok bool) { p.Tiering, ok = v.(policy.Tiering); return }},
		{plugins.KindRemap, "broker.remap.policy", n.Remap, func(v any) (ok bool) { p.Remap, ok = v.(policy.Remap); return }},
		{plugins.KindOrder, "broker.order", n.Order, func(v any) (ok bool) { p.Order, ok = v.(policy.Order); return }},
	} {
		cfg := pp.Base
		cfg.SHA256 = pp.SHA256[x.kind]
		r, isRef, err := plannerrpc.ParseRef(x.name)
		switch {
		case err != nil:
			started.Close()
			return bridge.Policies{}, nil, fmt.Errorf("%w: %s %q: %w", ErrConfig, x.key, x.name, err)
		case isRef && r.Builtin == "" && cfg.SHA256 == "":
			started.Close()
			return bridge.Policies{}, nil, fmt.Errorf("%w: %s %q: %w: an external %s plugin needs its executable's sha256 (%s_sha256; sha256sum %s)",
				ErrConfig, x.key, x.name, plugins.ErrBadRef, x.kind, x.key, r.Path)
		}
		if cfg.LogName == "" {
			cfg.LogName = x.kind
		}
		if on, log := pp.OnEvent, pp.Base.Logger; on != nil || log != nil {
			kind := x.kind
			cfg.OnSwitch = func(err error) {
				ev := PluginEvent{Plugin: kind, Kind: EventPolicyFallback, Detail: err.Error()}
				if se := (*policyrpc.SwitchError)(nil); errors.As(err, &se) && se.Restarted {
					ev.Kind = EventPolicyRestarted
					if log != nil { // the switch to the fallback is logged by policyrpc
						log.Warn("policy plugin failed and was restarted", "plugin", kind, "err", se.Err)
					}
				}
				if on != nil {
					on(ev)
				}
			}
		}
		if pp.Fallback {
			fb, _, err := policyrpc.Open(ctx, x.kind, "", policyrpc.Config{})
			if err != nil {
				started.Close()
				return bridge.Policies{}, nil, err
			}
			cfg.Fallback = fb
		}
		v, c, err := policyrpc.Open(ctx, x.kind, x.name, cfg)
		if c != nil {
			started.names = append(started.names, x.name)
		}
		if err != nil {
			started.Close()
			if errors.Is(err, plugins.ErrChecksum) {
				err = fmt.Errorf("%w; rebuild it or update %s_sha256 (sha256sum %s)", err, x.key, r.Path)
			}
			err = fmt.Errorf("%s %q: %w", x.key, x.name, err)
			if errors.Is(err, plugins.ErrUnknownPlugin) {
				err = fmt.Errorf("%w: %w", ErrConfig, err)
			}
			return bridge.Policies{}, nil, err
		}
		if c != nil {
			started.plugins = append(started.plugins, c.(*policyrpc.Plugin))
		}
		if !x.set(v) {
			started.Close()
			return bridge.Policies{}, nil, fmt.Errorf("%s policy %q: a %T is not one", x.kind, x.name, v)
		}
	}
	return p, started, nil
}

// PolicyPluginSet is the policy plugins PolicyNames.Open started.
type PolicyPluginSet struct {
	plugins []*policyrpc.Plugin
	names   []string // the references they were started from
}

// Close stops them.
func (s *PolicyPluginSet) Close() error {
	var errs []error
	for _, p := range s.plugins {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// Listings are their rows for `gridsub plugins`, named by kind.
func (s *PolicyPluginSet) Listings() []plugins.Listing {
	var out []plugins.Listing
	for i, p := range s.plugins {
		mode := plugins.ModeExternal
		if strings.HasPrefix(s.names[i], "plugin:builtin:") {
			mode = plugins.ModeIsolated
		}
		out = append(out, p.Listing(p.Kind, mode))
	}
	return out
}
