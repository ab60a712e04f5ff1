package main

import (
	"github.com/gridsub/gridsub/internal/config"
	"github.com/gridsub/gridsub/policy"
)

// configSites is what the configuration says of each site, for
// bridge.Feasible without asking any site. A simulated site is exactly
// its configuration. Of a real site (slurm, pbs, a plugin) the node count
// is known only when given (0 = ask the site: not known), its memory and
// GPUs as configured, and its cores per node only when given above the
// default of 1 (a site that leaves cores_per_node out is not ruled out
// for a job asking more): the site's own report decides at submission.
func configSites(cfg *config.Config) []policy.Site {
	out := make([]policy.Site, len(cfg.Sites))
	for i, s := range cfg.Sites {
		ps := policy.Site{Name: s.Name, Nodes: s.Nodes, H: s.H,
			Shape: policy.NodeShape{Cores: s.CoresPerNode, MemBytes: int64(s.MemPerNode), GPUs: s.GPUsPerNode}}
		if s.Kind != config.KindSim && s.CoresPerNode <= 1 {
			ps.Shape.Cores = 0
		}
		out[i] = ps
	}
	return out
}
