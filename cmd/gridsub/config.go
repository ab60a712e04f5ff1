package main

import (
	"log/slog"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/internal/config"
)

// loadConfig loads --config (or GRIDSUB_CONFIG), or the built-in simulated
// testbed when neither is given.
func loadConfig(g *globals) (*config.Config, error) {
	return config.Load(g.config)
}

// specFromConfig turns a configuration into what assemble builds.
func specFromConfig(cfg *config.Config, log *slog.Logger) (assemble.Spec, error) {
	spec := assemble.Spec{
		Links:     cfg.Links(),
		MultiSite: cfg.Network.MultiSiteFactor,
		Planner:   cfg.Broker.Policy,
		TimeScale: cfg.Sim.TimeScale,
		Seed:      cfg.Sim.Seed,
		Interval:  cfg.Broker.PollInterval,

		OutputRoot: cfg.Broker.OutputRoot,
		InputRoots: cfg.Broker.InputRoots,
	}
	spec.FetchWorkers, spec.FetchTimeout = cfg.Staging.FetchWorkers, cfg.Staging.FetchTimeout
	spec.Tiers = bridge.TierOptions{Lambda: cfg.Broker.QoS.Lambda, DownAfter: cfg.Broker.QoS.DownAfter}
	if r := cfg.Broker.Remap; r.Enabled {
		spec.Remap = &bridge.RemapOptions{MinGain: r.MinGain, MaxMoves: r.MaxMoves, Interval: r.Interval}
	}
	spec.PlannerSHA256, spec.FallbackPlanner, spec.PlannerTimeout = cfg.Broker.PolicySHA256, cfg.Broker.FallbackPolicy, cfg.Broker.PolicyTimeout
	spec.Policies = assemble.PolicyNames{Feasibility: cfg.Broker.Feasibility, Admission: cfg.Broker.Admission,
		Trust: cfg.Broker.Trust, Tiering: cfg.Broker.Tiering, Remap: cfg.Broker.Remap.Policy}
	for i := range cfg.Sites {
		s := &cfg.Sites[i]
		ss := assemble.SiteSpec{Name: s.Name, Kind: s.Kind, Nodes: s.Nodes, CoresPerNode: s.CoresPerNode, H: s.H,
			MemPerNode: int64(s.MemPerNode), GPUsPerNode: s.GPUsPerNode, Area: s.Area}
		if s.Isolate || s.Plugin != nil {
			p, err := pluginSite(s, &cfg.Staging, log)
			if err != nil {
				return spec, err
			}
			ss.Plugin = p
		} else if s.Kind != config.KindSim {
			real, err := realSite(s, &cfg.Staging, log)
			if err != nil {
				return spec, err
			}
			ss.Real = real
		}
		spec.Sites = append(spec.Sites, ss)
	}
	return spec, nil
}
