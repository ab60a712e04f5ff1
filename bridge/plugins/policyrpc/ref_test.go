package policyrpc

import (
	"context"
	"errors"
	"testing"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/policy"
)

func TestOpenBuiltinInProcess(t *testing.T) {
	impl, closer, err := Open(context.Background(), plugins.KindTrust, "paper002", Config{})
	if err != nil || closer != nil {
		t.Fatalf("%v %v", err, closer)
	}
	if _, ok := impl.(policy.Trust); !ok {
		t.Fatalf("a %T", impl)
	}
	if _, _, err := Open(context.Background(), plugins.KindTrust, "nope", Config{}); !errors.Is(err, plugins.ErrUnknownPlugin) {
		t.Errorf("an unknown built-in: %v", err)
	}
	if _, _, err := Open(context.Background(), plugins.KindTrust, "plugin:builtin:nope", Config{}); !errors.Is(err, plugins.ErrUnknownPlugin) {
		t.Errorf("an unknown built-in out of process: %v", err)
	}
	r, _, _ := plannerrpc.ParseRef("plugin:builtin:drrm")
	cfg, err := RefConfig(plugins.KindAdmission, r, func() (string, error) { return "/bin/gridsub", nil })
	if err != nil || cfg.Path != "/bin/gridsub" || len(cfg.Args) != 4 || cfg.Args[2] != "admission" || cfg.Args[3] != "drrm" {
		t.Errorf("RefConfig %+v %v", cfg, err)
	}
}
