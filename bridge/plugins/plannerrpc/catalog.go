package plannerrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/bridge/plugins"
)

// The plugin catalog starts planner plugins through this package.
func init() { plugins.RegisterPolicyLoader(plugins.KindPlanner, catalogLoad) }

// catalogLoad starts the planner plugin ref names for plugins.Policy.
func catalogLoad(ctx context.Context, spec plugins.PolicySpec, ref plugins.PolicyRef) (plugins.PolicyPlugin, error) {
	self := spec.Self
	if self == nil {
		self = os.Executable
	}
	cfg, err := Ref{Path: ref.Path, Args: ref.Args, Builtin: ref.Builtin}.Config(self)
	if err != nil {
		return nil, err
	}
	cfg.SHA256, cfg.CallTimeout = spec.SHA256, spec.CallTimeout
	cfg.Logger, cfg.LogName, cfg.Env = spec.Logger, spec.LogName, spec.Env
	p, err := Load(ctx, cfg)
	if err != nil {
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			err = fmt.Errorf("%w (its sha256 now is %s; compute it with: sha256sum %s)", err, fileSHA256(cfg.Path), cfg.Path)
		}
		return nil, err
	}
	return catalogPlugin{p}, nil
}

// catalogPlugin is a planner plugin as the catalog hands it out.
type catalogPlugin struct{ *Plugin }

// Policy is the plugin's policy.Planner.
func (p catalogPlugin) Policy() any { return p.Planner() }

// fileSHA256 is the file's SHA-256 in hex, or why it could not be read.
func fileSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return hex.EncodeToString(h.Sum(nil))
}
