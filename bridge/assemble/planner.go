package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
)

// Kinds of PluginEvent.
const (
	// EventPlannerRestarted: the planner plugin failed (crashed, or hung
	// past its call timeout) and was restarted; the cycle went on with it.
	EventPlannerRestarted = "planner-restarted"
	// EventPlannerFallback: the planner plugin kept failing; the fallback
	// built-in plans from now on (until the broker restarts).
	EventPlannerFallback = "planner-fallback"
	// EventPlannerRestartFailed: a restart of the planner plugin failed.
	EventPlannerRestartFailed = "planner-restart-failed"
)

// PluginEvent is something a plugin's supervision did: a planner plugin's
// restart or fallback (the Event* kinds), or a backend supervisor's event
// (bridge/plugins.SuperviseOptions.OnEvent: plugin-restarted,
// plugin-restart-failed, plugin-down, plugin-adopted).
type PluginEvent struct {
	Plugin string // the site's name, or PlannerPluginName
	Kind   string
	Detail string
}

// PlannerPluginName is the Name of the planner plugin in listings and
// events.
const PlannerPluginName = "planner"

// DefaultFallback is the built-in planner that replaces a failing planner
// plugin when the configuration names none.
const DefaultFallback = "greedy-easy"

// selfExecutable is the gridsub binary for plugin:builtin:NAME; tests
// point it at a binary they built.
var selfExecutable = os.Executable

// gridsubExecutable is selfExecutable's path, "" when it cannot be found
// (policyrpc.Config.Gridsub: then os.Executable is asked again, and its
// error reported, only for a plugin:builtin: reference).
func gridsubExecutable() string {
	exe, err := selfExecutable()
	if err != nil {
		return ""
	}
	return exe
}

// plannerPlugin is a live broker's planner plugin: the process, and what
// the fallback did.
type plannerPlugin struct {
	inst     *plugins.PolicyInstance
	sha256   string
	fallback string
	p        plugins.PolicyPlugin

	mu       sync.Mutex
	restarts int
	active   bool   // the fallback plans
	reason   string // the last failure
}

// buildPlanner returns the broker's planner, built by the plugin catalog
// (plugins.Policy): a built-in by name, or a planner plugin behind a
// plannerrpc.Fallback (restarted when it crashes or hangs, replaced by
// spec.FallbackPlanner when it keeps failing). pp is nil for a built-in.
func buildPlanner(ctx context.Context, spec Spec, log *slog.Logger, onPlugin func(PluginEvent)) (policy.Planner, *plannerPlugin, error) {
	if _, isPlugin, err := plugins.ParsePolicyRef(spec.Planner); err != nil {
		return nil, nil, fmt.Errorf("%w: broker.policy: %w", ErrConfig, err)
	} else if !isPlugin {
		areas := map[string]string{}
		for _, s := range spec.Sites {
			areas[s.Name] = s.Area
		}
		inst, err := plugins.Policy(ctx, plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: PlannerName(spec.Planner),
			Input: plugins.PolicyInput{Areas: areas}})
		if err != nil {
			return nil, nil, fmt.Errorf("%w: broker.policy: %w", ErrConfig, err)
		}
		return inst.Value.(policy.Planner), nil, nil
	}
	fbName := spec.FallbackPlanner
	if fbName == "" {
		fbName = DefaultFallback
	}
	fbv, err := plugins.BuiltinPolicy(plugins.KindPlanner, PlannerName(fbName), plugins.PolicyInput{})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: broker.fallback_policy: %w", ErrConfig, err)
	}
	fb := fbv.(policy.Planner)
	inst, err := plugins.Policy(ctx, plugins.PolicySpec{Kind: plugins.KindPlanner, Ref: spec.Planner, SHA256: spec.PlannerSHA256,
		CallTimeout: spec.PlannerTimeout, Self: selfExecutable, Env: pluginEnv(), Logger: log, LogName: PlannerPluginName})
	switch {
	case errors.Is(err, plugins.ErrBadRef), errors.Is(err, plugins.ErrUnknownPlugin), errors.Is(err, registry.ErrUnknown):
		return nil, nil, fmt.Errorf("%w: broker.policy %q: %w", ErrConfig, spec.Planner, err)
	case err != nil:
		return nil, nil, fmt.Errorf("broker.policy %q: %w", spec.Planner, err)
	}
	pp := &plannerPlugin{inst: inst, sha256: spec.PlannerSHA256, fallback: fb.Name(), p: inst.Plugin}
	timeout := spec.PlannerTimeout
	if timeout <= 0 {
		timeout = DefaultPlannerTimeout
	}
	f := &plannerrpc.Fallback{Primary: inst.Value.(policy.Planner), Fallback: fb, CallTimeout: timeout,
		MaxRestarts: PlannerMaxRestarts, RestartWindow: PlannerRestartWindow,
		OnSwitch: func(err error) { pp.switched(err, log, onPlugin) }}
	return f.Planner(), pp, nil
}

// A planner plugin that fails more than PlannerMaxRestarts times within
// PlannerRestartWindow is replaced by the fallback; one that fails now and
// then is restarted every time.
const (
	PlannerMaxRestarts   = 3
	PlannerRestartWindow = 10 * time.Minute
)

// DefaultPlannerTimeout bounds one planning call to a planner plugin when
// the configuration does not (broker.policy_timeout).
const DefaultPlannerTimeout = 30 * time.Second

// pluginEnv is a planner plugin's environment: only what a Go program
// needs to run, never gridsub's own variables (a token, a socket).
func pluginEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// switched records a restart or the switch to the fallback, logs it, and
// tells onPlugin.
func (pp *plannerPlugin) switched(err error, log *slog.Logger, onPlugin func(PluginEvent)) {
	var se *plannerrpc.SwitchError
	ev := PluginEvent{Plugin: PlannerPluginName, Kind: EventPlannerRestartFailed, Detail: err.Error()}
	pp.mu.Lock()
	switch {
	case errors.As(err, &se) && se.Restarted:
		pp.restarts++
		ev.Kind = EventPlannerRestarted
		log.Warn("planner plugin failed and was restarted", "plugin", PlannerPluginName, "policy", pp.inst.Ref,
			"pid", pp.p.Pid(), "restarts", pp.restarts, "err", se.Err)
	case errors.As(err, &se) && !se.RestartFailed:
		pp.active = true
		ev.Kind = EventPlannerFallback
		log.Error("planner plugin keeps failing; the fallback planner plans from now on", "plugin", PlannerPluginName,
			"policy", pp.inst.Ref, "fallback", se.To, "pid", pp.p.Pid(), "err", se.Err)
		// It is not asked again: stop it (a hung one would otherwise hold
		// its memory until the broker stops). Off the cycle: a graceful
		// stop may wait for a hung process.
		go pp.p.Close()
	default:
		log.Warn("planner plugin restart failed", "plugin", PlannerPluginName, "policy", pp.inst.Ref, "err", err)
	}
	pp.reason = err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		pp.reason += " (no answer within broker.policy_timeout)"
	}
	pp.mu.Unlock()
	if onPlugin != nil {
		onPlugin(ev)
	}
}

// listing is the planner plugin as `gridsub plugins` shows it.
func (pp *plannerPlugin) listing() plugins.Listing {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	// An external planner does not report its version over the planner
	// protocol; a built-in is this binary.
	// An external planner does not report its version over the planner
	// protocol; a built-in is this binary.
	l := plugins.Listing{Name: PlannerPluginName, Kind: plugins.KindPlanner, Mode: pp.inst.Mode, Impl: pp.inst.Impl,
		SHA256: pp.sha256, Pid: pp.p.Pid(), Health: "ok", Restarts: pp.restarts,
		Fallback: pp.fallback, FallbackActive: pp.active}
	if pp.inst.Mode == plugins.ModeIsolated {
		l.Version = plugins.Version()
	}
	switch {
	case pp.active:
		l.Health, l.Reason = "down", "replaced by the fallback "+pp.fallback+": "+pp.reason
	case pp.p.Exited():
		l.Health, l.Reason = "restarting", "the process exited; it is restarted at the next cycle"
	}
	return l
}
