package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/internal/config"
)

// Environment variables that say where the daemon is. Every command reads
// them the same way (daemonPaths, connect).
const (
	envStateDir = "GRIDSUB_STATE_DIR" // overrides broker.state_dir
	envSocket   = "GRIDSUB_SOCKET"    // overrides broker.socket
	envURL      = "GRIDSUB_URL"       // a daemon served over TCP (http://host:port); needs GRIDSUB_TOKEN
	envToken    = "GRIDSUB_TOKEN"     // the bearer token of a TCP daemon
	envCA       = "GRIDSUB_CA"        // PEM CA file that signed an https:// daemon's certificate (default: system roots)
)

// daemonPaths returns the state directory and the API socket: the
// configuration's broker.state_dir and broker.socket, overridden by
// GRIDSUB_STATE_DIR and GRIDSUB_SOCKET. A socket left at its default
// (<state_dir>/gridsub.sock) follows an overridden state directory.
func daemonPaths(cfg *config.Config) (stateDir, socket string, err error) {
	stateDir, socket = cfg.Broker.StateDir, cfg.Broker.Socket
	derived := socket == filepath.Join(stateDir, "gridsub.sock")
	if v := os.Getenv(envStateDir); v != "" {
		if stateDir, err = filepath.Abs(v); err != nil {
			return "", "", fmt.Errorf("%s=%q: %w", envStateDir, v, err)
		}
		if derived {
			socket = filepath.Join(stateDir, "gridsub.sock")
		}
	}
	if v := os.Getenv(envSocket); v != "" {
		socket = v
	}
	return stateDir, socket, nil
}

type serveFlags struct {
	listen        string
	tokenFile     string
	metricsListen string
	timeScale     float64
	keep          time.Duration
	trustHalfLife time.Duration
	logFormat     string
}

func newServeCmd(g *globals) *cobra.Command {
	f := &serveFlags{}
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker as a daemon that the other commands talk to",
		Long: `Serve runs the broker as a long-lived daemon. It keeps its state in
<state_dir>/gridsub.db (SQLite, every change committed before it is acted on),
recovers the unfinished jobs at start, serves the HTTP/JSON API (GET
/openapi.yaml) on a unix socket (mode 0600), and runs the scheduling cycle and
the other periodic tasks on the schedules of broker.cron:

  cycle            poll, plan, dispatch        default "@every <broker.interval>"
  reservation_binding  bind advance reservations whose window opens within 30s,
                   create them at their site and submit into them   default "@every 10s"
  health           probe every site            default "@every 1m"
  trust            recompute every site's trust from the stored outcomes   default "@every 5m"
                   (older outcomes weigh less: see --trust-half-life)
  history_cleanup  drop jobs ended long ago    default "@daily" (see --keep-history)

With simulated sites every schedule is on the simulated clock (virtual
time, as the jobs' times and reservation windows are), checked every 100ms of
wall time; otherwise on the wall clock.

While it runs, "gridsub job.yaml" and "gridsub submit" hand jobs to it and
return the grid job id at once (--wait follows the job), and status, list,
watch, events, cancel, history and output query it.

The state directory and the socket come from the configuration
(broker.state_dir, broker.socket), overridden by GRIDSUB_STATE_DIR and
GRIDSUB_SOCKET; every command finds the daemon the same way. Prometheus
metrics are at GET /metrics on the socket (and on --metrics-listen). Logs are
structured (log/slog) on stderr. SIGTERM or SIGINT stops it gracefully: no new
connections, requests and the current cycle finished, the store closed, the
socket removed.

One daemon per state directory: serve holds an exclusive lock on the state
directory itself (its pid in <state_dir>/gridsub.lock; deleting that file
frees nothing) from before it opens anything there until it stops; the kernel drops it when the process ends, even by
SIGKILL. A second serve on the same state directory exits with status 2 and
the first one's pid. The database is checked when serve starts (SQLite's
quick_check): an empty or damaged file is refused and left untouched — see
"gridsub store --help" for check, backup and restore. GET /v1/health answers
503 with a reason when the database is damaged, read-only or its disk full.

Simulated sites run inside the daemon on a virtual clock (--time-scale virtual
seconds per wall second); they do not survive a restart, so jobs that were
running on them when the daemon stopped are found lost and queued again.`,
		Example: `  gridsub serve &                          # the local site, state in ~/.local/state/gridsub
  gridsub --config testbed serve &         # the simulated testbed
  GRIDSUB_STATE_DIR=/tmp/gs gridsub serve --log-format json
  gridsub --config site.yaml serve --metrics-listen 127.0.0.1:9108
  GRIDSUB_TOKEN=$(cat tok) gridsub serve --listen 127.0.0.1:8470   # also on TCP, with a bearer token
  openssl rand -hex 32 > tok; chmod 600 tok                 # a token (at least 32 characters)
  GRIDSUB_BROKER_TLS_CERT=cert.pem GRIDSUB_BROKER_TLS_KEY=key.pem \
    gridsub serve --listen :8470 --token-file tok            # TLS: needed off loopback (clients: GRIDSUB_CA=cert.pem)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, g, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.listen, "listen", "", "also serve the API on this TCP address; needs a token of 32+ characters (GRIDSUB_TOKEN or --token-file), "+
		"and TLS (broker.tls_cert, broker.tls_key) unless the address is loopback or broker.insecure_plaintext is true")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token for --listen (default: GRIDSUB_TOKEN)")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "also serve /metrics (only) on this TCP address, without a token")
	fl.Float64Var(&f.timeScale, "time-scale", 0, "simulated sites only: virtual seconds per wall second (default: sim.time_scale)")
	fl.DurationVar(&f.keep, "keep-history", 30*24*time.Hour, "history cleanup deletes jobs that ended longer ago than this")
	fl.DurationVar(&f.trustHalfLife, "trust-half-life", daemon.DefaultTrustHalfLife,
		"for trust, a job outcome or an outage at a site weighs half as much after this long; 0 or less: never ages")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	return c
}

func runServe(cmd *cobra.Command, g *globals, f *serveFlags) error {
	if f.logFormat != "text" && f.logFormat != "json" {
		return usageErr(fmt.Errorf("--log-format must be text or json, got %q", f.logFormat))
	}
	level := g.logLevel
	if !cmd.Flags().Changed("log-level") {
		level = "info" // a daemon says what it does
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return usageErr(fmt.Errorf("--log-level must be debug, info, warn or error, got %q", level))
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	var log *slog.Logger
	if f.logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(g.stderr, hopts))
	} else {
		log = slog.New(slog.NewTextHandler(g.stderr, hopts))
	}
	cfg, err := loadConfig(g)
	if err != nil {
		return usageErr(err)
	}
	stateDir, socket, err := daemonPaths(cfg)
	if err != nil {
		return usageErr(err)
	}
	spec, err := specFromConfig(cfg, log)
	if err != nil {
		return usageErr(err)
	}
	token := os.Getenv(envToken)
	if f.tokenFile != "" {
		b, err := config.ReadRegular("--token-file", f.tokenFile, config.MaxTokenFile) // never a FIFO or a device
		if err != nil {
			return usageErr(err)
		}
		token = strings.TrimSpace(string(b))
	}
	tlsCert, tlsKey := cfg.Broker.TLSCert, cfg.Broker.TLSKey
	if f.listen == "" {
		token, tlsCert, tlsKey = "", "", "" // the socket's file mode is the protection
	}
	log.Info("starting", "config", cfg.Source, "state_dir", stateDir, "socket", socket)
	defer startProfiles(log)()
	err = daemon.Run(cmd.Context(), daemon.Options{Spec: spec, StateDir: stateDir, Socket: socket, Store: storeConfig(cfg), Shared: sharedOptions(cfg),
		Listen: f.listen, Token: token, TLSCert: tlsCert, TLSKey: tlsKey, InsecurePlaintext: cfg.Broker.InsecurePlaintext, SharedSocket: cfg.Broker.SharedSocket,
		MetricsListen: f.metricsListen, Interval: cfg.Broker.Interval,
		Cron: cfg.Broker.Cron, TimeScale: f.timeScale, Retention: f.keep, TrustHalfLife: halfLife(f.trustHalfLife), Logger: log})
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return nil
	case errors.Is(err, daemon.ErrOptions), errors.Is(err, daemon.ErrSchedule), errors.Is(err, api.ErrNotSocket),
		errors.Is(err, api.ErrInUse), errors.Is(err, daemon.ErrLocked), errors.Is(err, fs.ErrPermission), errors.Is(err, api.ErrPlaintext):
		return usageErr(err)
	case errors.Is(err, daemon.ErrSteppedDown):
		return &exitError{exitInternal, fmt.Errorf("%w; start gridsub serve again to follow", err)}
	}
	return &exitError{exitInternal, err}
}

// halfLife maps --trust-half-life to daemon.Options.TrustHalfLife, where 0
// means the default: a flag of 0 or less means outcomes never age.
func halfLife(flag time.Duration) time.Duration {
	if flag <= 0 {
		return -1
	}
	return flag
}
