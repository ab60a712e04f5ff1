package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/internal/config"
)

// loadConfig loads --config (or GRIDSUB_CONFIG), or the built-in local
// site (configs/local.yaml) when neither is given. A local site whose
// job directories lie where the configuration put them by default
// (<broker.state_dir>/sites/<name>) follows GRIDSUB_STATE_DIR, as the
// daemon's state and socket do (daemonPaths).
func loadConfig(g *globals) (*config.Config, error) {
	cfg, err := config.Load(g.config)
	if err != nil {
		return nil, err
	}
	if v := os.Getenv(envStateDir); v != "" {
		dir, err := filepath.Abs(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", envStateDir, v, err)
		}
		for i := range cfg.Sites {
			s := &cfg.Sites[i]
			if s.Kind == config.KindLocal && s.Plugin == nil && s.RemoteDir == filepath.Join(cfg.Broker.StateDir, "sites", s.Name) {
				s.RemoteDir = filepath.Join(dir, "sites", s.Name)
			}
		}
	}
	return cfg, nil
}

// specFromConfig turns a configuration into what assemble builds
// (config.Config.Spec: every site's backend described once, built by the
// plugin catalog in its mode).
func specFromConfig(cfg *config.Config, log *slog.Logger) (assemble.Spec, error) {
	return cfg.Spec(log)
}
