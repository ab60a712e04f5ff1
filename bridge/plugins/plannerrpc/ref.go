package plannerrpc

import (
	"fmt"
	"strings"
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
const RefPrefix = "plugin:"

const builtinPrefix = "builtin:"

// Ref is a parsed planner plugin reference.
type Ref struct {
	Path    string   // the executable (empty for a built-in)
	Args    []string // its arguments
	Builtin string   // NAME of plugin:builtin:NAME
}

// ParseRef parses a policy name. ok is false for a name without
// RefPrefix (a built-in planner run in process). It does not check that a
// built-in's name exists: the caller's policy registry does.
func ParseRef(name string) (r Ref, ok bool, err error) {
	rest, ok := strings.CutPrefix(name, RefPrefix)
	if !ok {
		return r, false, nil
	}
	if b, isBuiltin := strings.CutPrefix(rest, builtinPrefix); isBuiltin {
		if b == "" {
			return r, true, fmt.Errorf("%q names no built-in planner: write plugin:builtin:NAME", name)
		}
		return Ref{Builtin: b}, true, nil
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return r, true, fmt.Errorf("%q names no executable: write plugin:/path/to/planner, or plugin:builtin:NAME", name)
	}
	return Ref{Path: f[0], Args: f[1:]}, true, nil
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
