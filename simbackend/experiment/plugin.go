package experiment

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/simbackend/drrmsim"
)

// A policy whose name starts with PluginPrefix is a planner plugin
// (bridge/plugins/plannerrpc), so a centre can replay its own policy on
// its own trace before it goes live:
//
//	plugin:/path/to/planner [ARG...]  an executable (split on spaces: the
//	                                  path holds none), started for each run
//	plugin:builtin:NAME               a built-in planner run out of process
//	                                  (isolated): this gridsub binary,
//	                                  re-executed as `gridsub plugin serve
//	                                  planner NAME`
//
// Every run starts its own plugin process and stops it at its end. A
// plugin that crashes is restarted (at most three times per run; its
// session re-seeded from the host's mirror, so the results do not change);
// there is no fallback: a run's results are the plugin's or an error.
const PluginPrefix = plannerrpc.RefPrefix

// selfExecutable is the gridsub binary for plugin:builtin:NAME; tests
// point it at a planner plugin they built.
var selfExecutable = os.Executable

// pluginPolicy is a parsed plugin policy name.
type pluginPolicy struct {
	path    string
	args    []string
	builtin string // NAME of plugin:builtin:NAME
}

// parsePluginPolicy parses a policy name (plannerrpc.ParseRef, the
// broker's syntax too); ok is false for a name without PluginPrefix (a
// built-in run in process).
func parsePluginPolicy(name string) (pp pluginPolicy, ok bool, err error) {
	r, ok, err := plannerrpc.ParseRef(name)
	if !ok || err != nil {
		return pp, ok, err
	}
	if r.Builtin != "" {
		if _, err := registry.ByName(r.Builtin); err != nil {
			return pp, true, fmt.Errorf("%q: no built-in planner %q: valid are %s", name, r.Builtin, strings.Join(registry.Names(), ", "))
		}
	}
	return pluginPolicy{path: r.Path, args: r.Args, builtin: r.Builtin}, true, nil
}

func (pp pluginPolicy) config() (plannerrpc.Config, error) {
	return plannerrpc.Ref{Path: pp.path, Args: pp.args, Builtin: pp.builtin}.Config(selfExecutable)
}

// openPlanner gives the planner a policy names: a built-in, or a started
// plugin (close stops it).
func openPlanner(ctx context.Context, name string) (pl policy.Planner, close func(), err error) {
	pp, isPlugin, err := parsePluginPolicy(name)
	if err != nil {
		return nil, nil, err
	}
	if !isPlugin {
		pl, err := registry.ByName(name)
		return pl, func() {}, err
	}
	cfg, err := pp.config()
	if err != nil {
		return nil, nil, err
	}
	p, err := plannerrpc.Load(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("policy %q: %w", name, err)
	}
	restart := &plannerrpc.Fallback{Primary: p.Planner(), MaxRestarts: 3, CallTimeout: -1, OnSwitch: func(err error) {
		slog.Warn("planner plugin restarted", "policy", name, "err", err)
	}}
	return restart.Planner(), func() { p.Close() }, nil
}

// checkPlugins starts every plugin policy of e once, before any run, so
// that one that cannot start is one clear error naming it, not a failure
// halfway through the sweep.
func checkPlugins(ctx context.Context, e *Experiment) error {
	check := func(field, kind, name string) error {
		if _, isRef, _ := plannerrpc.ParseRef(name); !isRef {
			return nil
		}
		_, stop, err := openPolicy(ctx, kind, name)
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		stop()
		return nil
	}
	switch e.Kind {
	case KindDRRM:
		for i, name := range e.Policies {
			if err := check(fmt.Sprintf("policies[%d]", i), plugins.KindAdmission, name); err != nil {
				return err
			}
		}
		return nil
	case KindDGJS:
		return check("dgjs.tiering", plugins.KindTiering, e.DGJS.Tiering)
	}
	for i, name := range e.Policies {
		if _, ok, _ := parsePluginPolicy(name); !ok {
			continue
		}
		_, close, err := openPlanner(ctx, name)
		if err != nil {
			return fmt.Errorf("policies[%d]: %w", i, err)
		}
		close()
	}
	return nil
}

// checkPolicyRef checks a policy name of kind (a built-in's name or a
// plugin reference) without starting anything; "" is the kind's default.
func checkPolicyRef(kind, name string) error {
	if name == "" {
		return nil
	}
	r, isRef, err := plannerrpc.ParseRef(name)
	if err != nil {
		return err
	}
	if !isRef {
		r.Builtin = name
	}
	if r.Builtin != "" {
		if _, err := policyrpc.Builtin(kind, r.Builtin); err != nil {
			return err
		}
	}
	return nil
}

// openPolicy gives the policy of kind a name gives (policyrpc.Open): a
// built-in in process, or a started plugin, with no fallback — a run's
// results are the plugin's or an error. stop stops the plugin.
func openPolicy(ctx context.Context, kind, name string) (impl any, stop func(), err error) {
	exe, err := selfExecutable()
	if err != nil {
		exe = ""
	}
	impl, closer, err := policyrpc.Open(ctx, kind, name, policyrpc.Config{Gridsub: exe, CallTimeout: 5 * time.Minute})
	if err != nil {
		return nil, nil, fmt.Errorf("%s policy %q: %w", kind, name, err)
	}
	if closer == nil {
		return impl, func() {}, nil
	}
	return impl, func() { closer.Close() }, nil
}

// mechanismRun is one paper-001 mechanism ready to run.
type mechanismRun func(w *drrmsim.World, seed uint64, fail *drrmsim.Failure) (drrmsim.Result, error)

// openMechanism readies a paper-001 mechanism: one of the paper's three by
// its name, or an admission plugin by its reference (started now; stop
// stops it).
func openMechanism(ctx context.Context, name string) (run mechanismRun, stop func(), err error) {
	if _, isRef, _ := plannerrpc.ParseRef(name); !isRef {
		return func(w *drrmsim.World, seed uint64, fail *drrmsim.Failure) (drrmsim.Result, error) {
			return drrmsim.Run(w, name, seed, fail)
		}, func() {}, nil
	}
	impl, stop, err := openPolicy(ctx, plugins.KindAdmission, name)
	if err != nil {
		return nil, nil, err
	}
	adm := impl.(policy.Admission)
	return func(w *drrmsim.World, seed uint64, fail *drrmsim.Failure) (drrmsim.Result, error) {
		return drrmsim.RunAdmission(w, adm, seed, fail)
	}, stop, nil
}
