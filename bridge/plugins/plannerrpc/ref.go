package plannerrpc

import (
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/bridge/plugins"
)

// A policy name that starts with RefPrefix names a planner plugin, in an
// experiment file's policies and in the broker's broker.policy alike:
//
//	plugin:/path/to/planner [ARG...]  an executable (split on spaces: the
//	                                  path holds none)
//	plugin:builtin:NAME               a built-in planner run out of process
//	                                  (isolated): the gridsub binary,
//	                                  re-executed as `gridsub plugin serve
//	                                  planner NAME`
const RefPrefix = plugins.PolicyPluginPrefix

const builtinPrefix = "builtin:"

// Ref is a parsed planner plugin reference.
type Ref struct {
	Path    string   // the executable (empty for a built-in)
	Args    []string // its arguments
	Builtin string   // NAME of plugin:builtin:NAME
}

// ParseRef parses a policy name with the plugin catalog's syntax
// (plugins.ParsePolicyRef). ok is false for a name without RefPrefix (a
// built-in planner run in process). It does not check that a built-in's
// name exists: the caller's policy registry does.
func ParseRef(name string) (r Ref, ok bool, err error) {
	p, ok, err := plugins.ParsePolicyRef(name)
	return Ref{Path: p.Path, Args: p.Args, Builtin: p.Builtin}, ok, err
}

// String is the reference as it was written (arguments joined by one
// space).
func (r Ref) String() string {
	if r.Builtin != "" {
		return RefPrefix + builtinPrefix + r.Builtin
	}
	return RefPrefix + strings.Join(append([]string{r.Path}, r.Args...), " ")
}

// Config is how to start the plugin r names; self finds the gridsub
// executable for a built-in (os.Executable). The caller adds SHA256,
// timeouts and logging.
func (r Ref) Config(self func() (string, error)) (Config, error) {
	if r.Builtin == "" {
		return Config{Path: r.Path, Args: r.Args}, nil
	}
	exe, err := self()
	if err != nil {
		return Config{}, fmt.Errorf("finding the gridsub executable to run %s: %w", r, err)
	}
	return Config{Path: exe, Args: []string{"plugin", "serve", "planner", r.Builtin}}, nil
}
