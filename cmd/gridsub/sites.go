package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/internal/assemble"
	"github.com/gridsub/gridsub/internal/config"
)

func newSitesCmd(g *globals) *cobra.Command {
	var offline bool
	c := &cobra.Command{
		Use:   "sites",
		Short: "List the configured sites and their state",
		Long: `Sites lists every configured site: its kind, size, cores per node and
heterogeneity factor h (run-time multiplier; 1 = the reference machine,
smaller is faster), and — unless --offline — what the site reports now: free
nodes and queued and running jobs. A site that cannot be reached is listed
with the reason.`,
		Example: `  gridsub sites
  gridsub --config configs/local-slurm.yaml sites --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(g)
			if err != nil {
				return usageErr(err)
			}
			rows, err := siteRows(cmd.Context(), g, cfg, offline)
			if err != nil {
				return err
			}
			if g.json() {
				return writeJSON(g.stdout, rows)
			}
			fmt.Fprintf(g.stdout, "configuration: %s\n", cfg.Source)
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tNODES\tFREE\tCORES/NODE\tH\tQUEUED\tRUNNING\tENDPOINT\tSTATUS")
			for _, r := range rows {
				free, q, run := "-", "-", "-"
				if r.Free != nil {
					free, q, run = fmt.Sprint(*r.Free), fmt.Sprint(r.Queued), fmt.Sprint(r.Running)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%.2f\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Nodes, free, r.CoresPerNode, r.H, q, run, r.Endpoint, r.Status)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&offline, "offline", false, "only show the configuration; do not contact the sites")
	return c
}

type siteRow struct {
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	Nodes        int     `json:"nodes"`
	CoresPerNode int     `json:"cores_per_node"`
	H            float64 `json:"h"`
	Endpoint     string  `json:"endpoint,omitempty"`
	Free         *int    `json:"free_nodes,omitempty"`
	Queued       int     `json:"queued"`
	Running      int     `json:"running"`
	Status       string  `json:"status"`
}

func siteRows(ctx context.Context, g *globals, cfg *config.Config, offline bool) ([]siteRow, error) {
	rows := make([]siteRow, len(cfg.Sites))
	for i, s := range cfg.Sites {
		rows[i] = siteRow{Name: s.Name, Kind: s.Kind, Nodes: s.Nodes, CoresPerNode: s.CoresPerNode, H: s.H, Status: "not contacted"}
		if s.SSH != nil {
			rows[i].Endpoint = fmt.Sprintf("%s@%s:%d", s.SSH.User, s.SSH.Host, s.SSH.Port)
		}
	}
	if offline {
		return rows, nil
	}
	spec, err := specFromConfig(cfg, g.logger())
	if err != nil {
		return nil, usageErr(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	env, err := assemble.Build(ctx, spec, assemble.Options{Logger: g.logger()})
	if err != nil {
		// Say which site failed, but still list the configuration.
		for i := range rows {
			rows[i].Status = "unreachable: " + err.Error()
		}
		return rows, nil
	}
	defer env.Close()
	for i := range rows {
		be, _ := env.Broker.Site(rows[i].Name)
		info, err := be.Info(ctx)
		if err != nil {
			rows[i].Status = "error: " + err.Error()
			continue
		}
		free := info.FreeNodes
		rows[i].Free, rows[i].Queued, rows[i].Running, rows[i].Status = &free, info.Queued, info.Running, "ok"
		if rows[i].Nodes == 0 {
			rows[i].Nodes = info.Nodes
		}
		if info.CoresPerNode > 0 {
			rows[i].CoresPerNode = info.CoresPerNode
		}
	}
	return rows, nil
}
