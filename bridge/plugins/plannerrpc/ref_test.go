package plannerrpc

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestParseRef: the plugin: syntax of broker.policy and an experiment's
// policies, and the command each reference starts.
func TestParseRef(t *testing.T) {
	self := func() (string, error) { return "/usr/bin/gridsub", nil }
	for _, c := range []struct {
		name     string
		isPlugin bool
		path     string
		args     []string
		errText  string
	}{
		{name: "greedy-easy"},
		{name: "plugin:/opt/p", isPlugin: true, path: "/opt/p", args: []string{}},
		{name: "plugin:/opt/p  -v   x", isPlugin: true, path: "/opt/p", args: []string{"-v", "x"}},
		{name: "plugin:builtin:greedy-easy", isPlugin: true, path: "/usr/bin/gridsub", args: []string{"plugin", "serve", "planner", "greedy-easy"}},
		{name: "plugin:", isPlugin: true, errText: "names no executable"},
		{name: "plugin:builtin:", isPlugin: true, errText: "names no built-in planner"},
	} {
		r, ok, err := ParseRef(c.name)
		if ok != c.isPlugin {
			t.Errorf("%q: plugin %v, want %v", c.name, ok, c.isPlugin)
		}
		if c.errText != "" {
			if err == nil || !strings.Contains(err.Error(), c.errText) {
				t.Errorf("%q: %v, want an error saying %q", c.name, err, c.errText)
			}
			continue
		}
		if err != nil || !ok {
			continue
		}
		if got := r.String(); got != strings.Join(strings.Fields(c.name), " ") {
			t.Errorf("%q: String %q", c.name, got)
		}
		cfg, err := r.Config(self)
		if err != nil || cfg.Path != c.path || !slices.Equal(cfg.Args, c.args) {
			t.Errorf("%q: Config %+v %v, want %s %v", c.name, cfg, err, c.path, c.args)
		}
	}
	_, err := Ref{Builtin: "greedy"}.Config(func() (string, error) { return "", errors.New("no /proc") })
	if err == nil || !strings.Contains(err.Error(), "plugin:builtin:greedy") {
		t.Errorf("a built-in without the executable: %v", err)
	}
}
