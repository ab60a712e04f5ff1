package config

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// Spec turns the configuration into what assemble builds. Every site's
// backend is described once (BackendSpec) and built by the plugin catalog
// in its mode; log receives the backends' and plugins' messages.
func (c *Config) Spec(log *slog.Logger) (assemble.Spec, error) {
	spec := assemble.Spec{
		Links:     c.Links(),
		MultiSite: c.Network.MultiSiteFactor,
		Planner:   c.Broker.Policy,
		TimeScale: c.Sim.TimeScale,
		Seed:      c.Sim.Seed,
		Interval:  c.Broker.PollInterval,

		OutputRoot: c.Broker.OutputRoot,
		InputRoots: c.Broker.InputRoots,
	}
	spec.FetchWorkers, spec.FetchTimeout = c.Staging.FetchWorkers, c.Staging.FetchTimeout
	if len(c.Users) > 0 {
		spec.Users = map[string]bridge.UserLimits{}
		for u, l := range c.Users {
			spec.Users[u] = bridge.UserLimits{MaxQueued: l.MaxQueued, MaxRunning: l.MaxRunning, MaxRunningPerSite: l.MaxRunningPerSite, Shares: l.Shares}
		}
	}
	spec.FairShareHalfLife = c.Broker.FairShareHalfLife
	spec.Tiers = bridge.TierOptions{Lambda: c.Broker.QoS.Lambda, DownAfter: c.Broker.QoS.DownAfter}
	if r := c.Broker.Remap; r.Enabled {
		spec.Remap = &bridge.RemapOptions{MinGain: r.MinGain, MaxMoves: r.MaxMoves, Interval: r.Interval}
	}
	spec.PlannerSHA256, spec.FallbackPlanner, spec.PlannerTimeout = c.Broker.PolicySHA256, c.Broker.FallbackPolicy, c.Broker.PolicyTimeout
	spec.Policies = assemble.PolicyNames{Feasibility: c.Broker.Feasibility, Admission: c.Broker.Admission,
		Trust: c.Broker.Trust, Tiering: c.Broker.Tiering, Remap: c.Broker.Remap.Policy, Order: c.Broker.Order}
	spec.PolicySHA256 = policySHA256(&c.Broker) // policies.go
	for i := range c.Sites {
		s := &c.Sites[i]
		b, err := c.BackendSpec(s, log)
		if err != nil {
			return spec, err
		}
		// The catalog checks now what it would refuse when the broker is
		// built (a built-in that does not exist, a site with no ssh).
		if _, err := plugins.Resolve(b); err != nil {
			return spec, err
		}
		spec.Sites = append(spec.Sites, assemble.SiteSpec{Name: s.Name, Kind: s.Kind, Nodes: s.Nodes, CoresPerNode: s.CoresPerNode, H: s.H,
			MemPerNode: int64(s.MemPerNode), GPUsPerNode: s.GPUsPerNode, Area: s.Area, Backend: &b})
	}
	return spec, nil
}

// BackendSpec is site s as the plugin catalog builds its backend: its
// description (every field a backend reads, the staging limits included)
// and its mode: in process by default, the built-in isolated with
// isolate, or the external executable of its plugin section.
func (c *Config) BackendSpec(s *Site, log *slog.Logger) (plugins.BackendSpec, error) {
	st := &c.Staging
	spec := plugins.BackendSpec{
		Config: plugins.BackendConfig{Name: s.Name, Kind: s.Kind, Nodes: s.Nodes, CoresPerNode: s.CoresPerNode, H: s.H,
			MemPerNode: int64(s.MemPerNode), GPUsPerNode: s.GPUsPerNode,
			Partition: s.Partition, Account: s.Account, RemoteDir: s.RemoteDir, BinDir: s.BinDir,
			NativeArrays: s.UsesNativeArrays(),
			Staging: &plugins.StagingConfig{MaxFileSize: int64(st.MaxFileSize), MaxJobBytes: int64(st.MaxJobBytes),
				MinRate: float64(st.MinRate), MinTime: st.MinTime}},
		Builtin: s.Kind, Isolate: s.Isolate, Logger: log,
	}
	if b := s.Budget; b != nil {
		spec.Config.Budget = &plugins.BudgetConfig{PerMinute: b.PerMinute, Burst: b.Burst, PollFast: b.PollFast, PollSlow: b.PollSlow,
			Settle: b.Settle, CapacityEvery: b.CapacityEvery, BackoffMax: b.BackoffMax, CommandTimeout: b.CommandTimeout}
	}
	if x := s.SSH; x != nil {
		spec.Config.SSH = &plugins.SSHConfig{Host: x.Host, Port: x.Port, User: x.User, Agent: x.Agent,
			InsecureIgnoreHostKey: x.InsecureIgnoreHostKey, MaxSessions: x.MaxSessions,
			SSHConfig: x.SSHConfig, ProxyJump: x.ProxyJump}
		if x.CertFile != "" {
			spec.Config.SSH.CertFiles = []string{x.CertFile}
		}
		if x.KeyFile != "" {
			spec.Config.SSH.KeyFiles = []string{x.KeyFile}
		}
		if x.KnownHosts != "" {
			spec.Config.SSH.KnownHosts = []string{x.KnownHosts}
		}
	}
	if p := s.Plugin; p != nil {
		spec.Path, spec.SHA256, spec.Args, spec.StartTimeout = p.Path, p.SHA256, p.Args, p.StartTimeout
		if len(p.Options) > 0 {
			raw, err := json.Marshal(p.Options)
			if err != nil {
				return spec, fmt.Errorf("site %s: plugin.options: %w", s.Name, err)
			}
			spec.Config.Options = raw
		}
	}
	return spec, nil
}
