package config

import (
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"time"
)

// PlannerPluginPrefix starts a broker.policy that names a planner plugin:
// plugin:/path/to/exe ARGS (an executable; broker.policy_sha256 gives its
// checksum) or plugin:builtin:NAME (a built-in planner re-executed as
// `gridsub plugin serve planner NAME`). The same syntax as an experiment
// file's policies.
const PlannerPluginPrefix = "plugin:"

// MaxPolicyTimeout bounds broker.policy_timeout.
const MaxPolicyTimeout = time.Hour

// validatePlannerPlugin checks broker.policy, policy_sha256,
// fallback_policy and policy_timeout. Planner names themselves are checked
// by the policy registry when the broker is built.
func (c *Config) validatePlannerPlugin() Errors {
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{File: c.Source, Field: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
	}
	b := &c.Broker
	rest, isPlugin := strings.CutPrefix(b.Policy, PlannerPluginPrefix)
	switch {
	case !isPlugin:
		if !policyRE().MatchString(b.Policy) {
			bad("broker.policy", "must name a planner (e.g. greedy) or a planner plugin (plugin:/path/to/exe ARGS, plugin:builtin:NAME), got %q", b.Policy)
		}
		if b.PolicySHA256 != "" {
			bad("broker.policy_sha256", "is only for a planner plugin executable (broker.policy: plugin:/path/to/exe); remove it")
		}
	case strings.HasPrefix(rest, "builtin:"):
		if name := strings.TrimPrefix(rest, "builtin:"); !policyRE().MatchString(name) {
			bad("broker.policy", "plugin:builtin: must be followed by a built-in planner's name (e.g. plugin:builtin:greedy-easy), got %q", b.Policy)
		}
		if b.PolicySHA256 != "" {
			bad("broker.policy_sha256", "a plugin:builtin: planner is this gridsub binary itself and has no checksum to give; remove it")
		}
	default:
		f := strings.Fields(rest)
		if len(f) == 0 || !path.IsAbs(f[0]) {
			bad("broker.policy", "plugin: must be followed by the planner executable's absolute path and its arguments (plugin:/path/to/exe ARGS), got %q", b.Policy)
		}
		exe := "/path/to/exe"
		if len(f) > 0 {
			exe = f[0]
		}
		if sum, err := hex.DecodeString(b.PolicySHA256); err != nil || len(sum) != 32 {
			bad("broker.policy_sha256", "must be the planner plugin's SHA-256 as 64 hex digits, quoted (policy_sha256: \"...\"; sha256sum %s), got %q", exe, b.PolicySHA256)
		}
	}
	if strings.HasPrefix(b.FallbackPolicy, PlannerPluginPrefix) || !policyRE().MatchString(b.FallbackPolicy) {
		bad("broker.fallback_policy", "must name a built-in planner (e.g. greedy-easy), got %q", b.FallbackPolicy)
	}
	if b.PolicyTimeout <= 0 || b.PolicyTimeout > MaxPolicyTimeout {
		bad("broker.policy_timeout", "must be a duration from 1ns to %s (one planning call to a planner plugin), got %s", MaxPolicyTimeout, b.PolicyTimeout)
	}
	return errs
}

// validatePlugin checks a site's isolate and plugin settings.
func (c *Config) validatePlugin(s *Site, k string) Errors {
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{File: c.Source, Field: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
	}
	if s.Isolate && s.Kind != KindSlurm && s.Kind != KindPBS && s.Kind != KindLocal {
		bad(k+".isolate", "only a slurm, pbs or local site's built-in backend runs isolated (a simulated site lives on the broker's clock), got kind %q", s.Kind)
	}
	p := s.Plugin
	if p == nil {
		return errs
	}
	if s.Isolate {
		bad(k+".isolate", "an external plugin already runs out of process; remove isolate or the plugin section")
	}
	if s.Kind == KindSim {
		bad(k+".plugin", "a simulated site cannot be an external plugin; use kind: the plugin's own kind")
	}
	if p.Path == "" {
		bad(k+".plugin.path", "missing; give the plugin executable")
	}
	if sum, err := hex.DecodeString(p.SHA256); err != nil || len(sum) != 32 {
		bad(k+".plugin.sha256", "must be the executable's SHA-256 as 64 hex digits, quoted (sha256: \"...\"; sha256sum %s), got %q", p.Path, p.SHA256)
	}
	if p.StartTimeout < 0 {
		bad(k+".plugin.start_timeout", "must be >= 0 (0 = 10s), got %s", p.StartTimeout)
	}
	return errs
}
