package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/policy"
)

func newPluginCmd() *cobra.Command {
	c := &cobra.Command{
		Use:    "plugin",
		Short:  "Serve one of gridsub's built-ins as a plugin (run by gridsub itself)",
		Hidden: true,
		Long: `plugin serve runs one of gridsub's built-in backends as a go-plugin
process. gridsub starts it itself for a site with "isolate: true"; run by
hand it only says that it is a plugin and exits.`,
	}
	serve := &cobra.Command{Use: "serve", Short: "Serve a built-in backend or policy (of any kind) over the plugin protocol"}
	serve.AddCommand(&cobra.Command{
		Use:       "backend NAME",
		Short:     "Serve the built-in backend NAME (" + strings.Join(plugins.BuiltinBackends(), ", ") + ")",
		Args:      cobra.ExactArgs(1),
		ValidArgs: plugins.BuiltinBackends(),
		RunE: func(_ *cobra.Command, args []string) error {
			f, err := plugins.BuiltinBackend(args[0])
			if err != nil {
				return usageErr(err)
			}
			plugins.ServeBackendFactory(f, plugins.Version())
			return nil
		},
	})
	serve.AddCommand(&cobra.Command{
		Use:   "planner NAME",
		Short: "Serve the built-in planner NAME",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p, err := plugins.BuiltinPolicy(plugins.KindPlanner, args[0], plugins.PolicyInput{})
			if err != nil {
				return usageErr(err)
			}
			plannerrpc.ServePlanner(p.(policy.Planner))
			return nil
		},
	})
	addPolicyServeCmds(serve) // plugin_policy.go
	c.AddCommand(serve)
	return c
}

func newPluginsCmd(g *globals) *cobra.Command {
	var embedded, builtins bool
	c := &cobra.Command{
		Use:   "plugins",
		Short: "List the plugins the configuration loads: mode, version, checksum, pid and health",
		Long: `Plugins loads the configuration's sites as a broker would and lists, for each,
what serves its backend, then the broker's planner plugin when
broker.policy names one (plugin:/path/to/exe, plugin:builtin:NAME), then
each policy plugin broker.feasibility, admission, trust, tiering,
remap.policy or order names (NAME is then the policy kind):

  MODE     in-process (a built-in inside gridsub, the fast path), isolated (a
           built-in re-executed as "gridsub plugin serve backend NAME") or
           external (an executable from the site's plugin.path)
  IMPL     the built-in's name or the executable
  VERSION  as the plugin reported it
  SHA256   the executable's checksum, verified before it started
  PID      the plugin process
  HEALTH   ok, restarting or down (with the reason under the table)
  RESTARTS restarts after a crash or hang since gridsub started

A planner plugin that keeps failing is replaced by broker.fallback_policy:
its HEALTH is then "down" and the note under the table names the fallback
(fallback_active in --output json).

With a daemon running (found as every command finds it) it lists what the
daemon has loaded (GET /v1/plugins), restarts and crash loops included.
Without one, or with --embedded, it loads the configuration's sites here,
lists them and stops them again.

The table ends with the seven policy kinds (placement, feasibility,
admission, trust, tiering, remap, order), what the configuration chose for each
(CONFIGURED: a built-in's name or a plugin reference) and their
built-ins, each of which "gridsub plugin serve KIND NAME" runs out of
process. --builtins prints only that list, without loading the
configuration (and without CONFIGURED).

--output json prints the loaded plugins' records (with --builtins, the
kinds).`,
		Example: `  gridsub --config site.yaml plugins
  gridsub --config site.yaml plugins --output json
  gridsub plugins --builtins`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if builtins {
				return writeKinds(g.stdout, g.json())
			}
			if !embedded {
				c, err := connect(cmd.Context(), g)
				var ee *exitError
				switch {
				case err == nil:
					r, err := c.Plugins(cmd.Context())
					if err != nil {
						return &exitError{exitInternal, err}
					}
					rows := make([]plugins.Listing, len(r.Plugins))
					for i, p := range r.Plugins {
						rows[i] = plugins.Listing(p)
					}
					if g.json() {
						return writeJSON(g.stdout, rows)
					}
					return writePlugins(g.stdout, rows, r.Policies)
				case errors.As(err, &ee):
					return err
				case !errors.Is(err, errNoDaemon):
					return &exitError{exitInternal, fmt.Errorf("%w (--embedded loads the plugins here without the daemon)", err)}
				}
			}
			cfg, err := loadConfig(g)
			if err != nil {
				return usageErr(err)
			}
			spec, err := specFromConfig(cfg, g.logger())
			if err != nil {
				return usageErr(err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			env, err := assemble.Build(ctx, spec, assemble.Options{Logger: g.logger()})
			if err != nil {
				return &exitError{exitInternal, err}
			}
			defer env.Close()
			var rows []plugins.Listing
			for _, s := range cfg.Sites {
				be, _ := env.Broker.Site(s.Name)
				rows = append(rows, plugins.Describe(s.Name, s.Kind, be))
			}
			if l, ok := env.PlannerPlugin(); ok {
				rows = append(rows, l)
			}
			rows = append(rows, env.PolicyPlugins()...)
			if g.json() {
				return writeJSON(g.stdout, rows)
			}
			return writePlugins(g.stdout, rows, env.ConfiguredPolicies())
		},
	}
	c.Flags().BoolVar(&embedded, "embedded", false, "load the configuration's plugins here even when a daemon runs")
	c.Flags().BoolVar(&builtins, "builtins", false, "list the policy kinds and their built-ins only (no configuration needed)")
	return c
}

// writePlugins prints the loaded plugins, then the policy kinds with
// what configured chose for each (nil: the column is left out).
func writePlugins(w io.Writer, rows []plugins.Listing, configured map[string]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tMODE\tIMPL\tVERSION\tSHA256\tPID\tHEALTH\tRESTARTS")
	var notes []string
	for _, r := range rows {
		sum, pid := "-", "-"
		if r.SHA256 != "" {
			sum = r.SHA256[:12] + "…"
		}
		if r.Pid != 0 {
			pid = fmt.Sprint(r.Pid)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Name, r.Kind, r.Mode, r.Impl, r.Version, sum, pid, r.Health, r.Restarts)
		switch {
		case r.Reason != "":
			notes = append(notes, fmt.Sprintf("%s: %s", r.Name, r.Reason))
		case r.Fallback != "":
			notes = append(notes, fmt.Sprintf("%s: falls back to the built-in %s if it keeps failing", r.Name, r.Fallback))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintln(w)
	return writeKindsTable(w, configured)
}
