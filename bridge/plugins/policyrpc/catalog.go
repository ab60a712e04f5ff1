package policyrpc

import (
	"context"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
)

// The plugin catalog (plugins.Policy) starts the six policy kinds'
// plugins through this package, as it starts planners through plannerrpc.
func init() {
	for _, k := range Kinds() {
		plugins.RegisterPolicyLoader(k, catalogLoad)
	}
}

// catalogLoad starts the plugin ref names for plugins.Policy: a *Plugin,
// whose Policy survives restarts.
func catalogLoad(ctx context.Context, spec plugins.PolicySpec, ref plugins.PolicyRef) (plugins.PolicyPlugin, error) {
	cfg, err := RefConfig(spec.Kind, plannerrpc.Ref{Path: ref.Path, Args: ref.Args, Builtin: ref.Builtin}, spec.Self)
	if err != nil {
		return nil, err
	}
	cfg.SHA256, cfg.CallTimeout, cfg.Env = spec.SHA256, spec.CallTimeout, spec.Env
	cfg.Logger, cfg.LogName = spec.Logger, spec.LogName
	return Load(ctx, spec.Kind, cfg)
}
