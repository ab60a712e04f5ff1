package main

import (
	"log/slog"

	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/internal/config"
)

// loadConfig loads --config (or GRIDSUB_CONFIG), or the built-in local
// site (configs/local.yaml) when neither is given.
func loadConfig(g *globals) (*config.Config, error) {
	return config.Load(g.config)
}

// specFromConfig turns a configuration into what assemble builds
// (config.Config.Spec: every site's backend described once, built by the
// plugin catalog in its mode).
func specFromConfig(cfg *config.Config, log *slog.Logger) (assemble.Spec, error) {
	return cfg.Spec(log)
}
