package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/internal/config"
	"github.com/gridsub/gridsub/policy/registry"
)

// pluginSite returns the constructor of a site whose backend runs out of
// process: its built-in isolated, or an external plugin. The backend is a
// plugins.Supervisor (one stable value; the process behind it restarts).
// st bounds its transfers as in process (BackendConfig.Staging); onEvent
// gets the supervisor's restarts and crash loop.
func pluginSite(s *config.Site, st *config.Staging, log *slog.Logger) (func(context.Context, func(site, kind, detail string)) (backends.Backend, io.Closer, error), error) {
	spec := plugins.BackendSpec{
		Config: plugins.BackendConfig{Name: s.Name, Kind: s.Kind, Nodes: s.Nodes, CoresPerNode: s.CoresPerNode, H: s.H,
			Partition: s.Partition, RemoteDir: s.RemoteDir, BinDir: s.BinDir,
			Staging: &plugins.StagingConfig{MaxFileSize: int64(st.MaxFileSize), MaxJobBytes: int64(st.MaxJobBytes),
				MinRate: float64(st.MinRate), MinTime: st.MinTime}},
		Builtin: s.Kind, Isolate: s.Isolate, Logger: log,
	}
	if x := s.SSH; x != nil {
		spec.Config.SSH = &plugins.SSHConfig{Host: x.Host, Port: x.Port, User: x.User, Agent: x.Agent,
			InsecureIgnoreHostKey: x.InsecureIgnoreHostKey, MaxSessions: x.MaxSessions}
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
				return nil, fmt.Errorf("site %s: plugin.options: %w", s.Name, err)
			}
			spec.Config.Options = raw
		}
	} else if _, err := plugins.BuiltinBackend(s.Kind); err != nil {
		return nil, fmt.Errorf("site %s: isolate: %w", s.Name, err)
	}
	return func(ctx context.Context, onEvent func(site, kind, detail string)) (backends.Backend, io.Closer, error) {
		sup, err := plugins.Supervise(ctx, spec, plugins.SuperviseOptions{OnEvent: onEvent})
		if err != nil {
			return nil, nil, err
		}
		return sup, sup, nil
	}, nil
}

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
			p, err := registry.ByName(args[0])
			if err != nil {
				return usageErr(err)
			}
			plannerrpc.ServePlanner(p)
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
broker.policy names one (plugin:/path/to/exe, plugin:builtin:NAME):

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

The table ends with the six policy kinds (placement, feasibility,
admission, trust, tiering, remap) and their built-ins, each of which
"gridsub plugin serve KIND NAME" runs out of process. --builtins prints
only that list, without loading the configuration.

--output json prints the same records (the loaded plugins; with
--builtins, the kinds).`,
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
					return writePlugins(g.stdout, rows)
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
			if g.json() {
				return writeJSON(g.stdout, rows)
			}
			return writePlugins(g.stdout, rows)
		},
	}
	c.Flags().BoolVar(&embedded, "embedded", false, "load the configuration's plugins here even when a daemon runs")
	c.Flags().BoolVar(&builtins, "builtins", false, "list the policy kinds and their built-ins only (no configuration needed)")
	return c
}

func writePlugins(w io.Writer, rows []plugins.Listing) error {
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
	return writeKinds(w, false)
}
