package policyrpc

import (
	"context"
	"testing"

	"github.com/gridsub/gridsub/bridge/plugins"
)

// TestCatalogBuildsEveryKind: the plugin catalog builds every policy kind,
// in process by name and out of process from a plugin: reference through
// this package's loader.
func TestCatalogBuildsEveryKind(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a plugin")
	}
	bin, sum := testPolicy(t)
	for _, c := range []struct{ kind, name string }{
		{plugins.KindFeasibility, "capacity"}, {plugins.KindAdmission, "drrm"}, {plugins.KindTrust, "paper002"},
		{plugins.KindTiering, "dgjs"}, {plugins.KindRemap, "gain"}, {plugins.KindOrder, "fairshare"},
	} {
		in, err := plugins.Policy(context.Background(), plugins.PolicySpec{Kind: c.kind, Ref: c.name})
		if err != nil || in.Mode != plugins.ModeInProcess || in.Value.(interface{ Name() string }).Name() != c.name {
			t.Fatalf("%s %s in process: %+v %v", c.kind, c.name, in, err)
		}
		ext, err := plugins.Policy(context.Background(), plugins.PolicySpec{Kind: c.kind, Ref: "plugin:" + bin + " " + c.kind + " " + c.name, SHA256: sum})
		if err != nil {
			t.Fatalf("%s %s out of process: %v", c.kind, c.name, err)
		}
		if ext.Mode != plugins.ModeExternal || ext.Plugin.Pid() <= 0 || ext.Value.(interface{ Name() string }).Name() != c.name {
			t.Errorf("%s %s out of process: %+v", c.kind, c.name, ext)
		}
		if !isKind(c.kind, ext.Value) {
			t.Errorf("%s: a %T", c.kind, ext.Value)
		}
		ext.Plugin.Close()
	}
	if _, err := plugins.Policy(context.Background(), plugins.PolicySpec{Kind: plugins.KindTrust, Ref: "plugin:builtin:nope"}); err == nil {
		t.Error("an unknown built-in out of process")
	}
}
