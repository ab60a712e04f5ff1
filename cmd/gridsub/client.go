package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/daemon"
	"github.com/gridsub/gridsub/internal/config"
)

// errNoDaemon: no daemon answers where this command looks for one.
var errNoDaemon = errors.New("no gridsub daemon answers")

// daemonClient is a client of the daemon and where it was found.
type daemonClient struct {
	*api.Client
	where string
	sim   bool // the daemon's clock is the simulated sites' (GET /v1/health)
}

// connect finds the daemon: GRIDSUB_URL (TCP, with GRIDSUB_TOKEN) if set,
// else the unix socket of daemonPaths. It returns an error wrapping
// errNoDaemon, with the advice to start one, when nobody answers.
func connect(ctx context.Context, g *globals) (*daemonClient, error) {
	var c *daemonClient
	var stateDir string
	var cfg *config.Config
	if u := os.Getenv(envURL); u != "" {
		tc, err := api.ClientTLS(os.Getenv(envCA))
		if err != nil {
			return nil, usageErr(fmt.Errorf("%s: %w", envCA, err))
		}
		c = &daemonClient{Client: api.NewClient(u, os.Getenv(envToken), api.HTTPClient(tc, 0)), where: u}
	} else {
		var err error
		if cfg, err = loadConfig(g); err != nil {
			return nil, usageErr(err)
		}
		sd, socket, err := daemonPaths(cfg)
		if err != nil {
			return nil, usageErr(err)
		}
		stateDir = sd
		c = &daemonClient{Client: api.NewUnixClient(socket), where: socket}
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := c.Health(hctx)
	var ae *api.Error
	switch {
	case err == nil, errors.As(err, &ae): // it answers (perhaps unhealthy: its requests will say why)
		c.sim = h != nil && h.Simulated
		if h != nil && cfg != nil && g.configFlag && len(h.SiteNames) > 0 && !slices.Equal(h.SiteNames, cfg.SiteNames()) {
			// The job was meant for the sites of --config, not the daemon's.
			return nil, usageErr(fmt.Errorf("the daemon at %s runs the sites %s, but --config %s names %s; "+
				"nothing was sent to it. Use --embedded to run here with %s, or stop that daemon and start `gridsub --config %s serve &`",
				c.where, strings.Join(h.SiteNames, ", "), g.config, strings.Join(cfg.SiteNames(), ", "), g.config, g.config))
		}
		return c, nil
	case errors.Is(err, api.ErrNoDaemon):
		return nil, fmt.Errorf("%w at %s; %s", errNoDaemon, c.where, noDaemonAdvice(stateDir))
	}
	return nil, fmt.Errorf("asking the daemon at %s: %w", c.where, err)
}

// mustConnect is connect for commands that need a daemon.
func mustConnect(ctx context.Context, g *globals) (*daemonClient, error) {
	c, err := connect(ctx, g)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return nil, err
		}
		return nil, &exitError{exitInternal, err}
	}
	return c, nil
}

// clientErr gives an error from the daemon its exit code.
func clientErr(err error) error {
	switch {
	case errors.Is(err, bridge.ErrInfeasible): // the job can never run: as a rejection
		return &exitError{exitJobFailed, err}
	case errors.Is(err, bridge.ErrNotFound), errors.Is(err, bridge.ErrBadRequest), errors.Is(err, bridge.ErrUnknownSite), errors.Is(err, bridge.ErrOverLimit):
		return usageErr(err)
	case errors.Is(err, bridge.ErrFinal):
		return &exitError{exitJobFailed, err}
	}
	return &exitError{exitInternal, err}
}

// now is the daemon's clock (virtual on simulated sites), or the local
// clock if it cannot be read.
func (c *daemonClient) now(ctx context.Context) time.Time {
	h, err := c.Health(ctx)
	if err != nil || h.Time.IsZero() {
		return time.Now()
	}
	return h.Time
}

// followRemote polls a job in the daemon until it ends, showing progress on
// stderr. Ctrl-C stops following; the job goes on in the daemon.
func followRemote(ctx context.Context, g *globals, quiet bool, c *daemonClient, id string, every time.Duration) (*bridge.Job, error) {
	tty := false
	if fd, ok := g.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(fd.Fd()))
	}
	p := &progress{g: g, quiet: quiet, tty: tty}
	stopped := func() (*bridge.Job, error) {
		p.clearLine()
		if !quiet {
			fmt.Fprintf(g.stderr, "stopped following %s; it goes on in the daemon (gridsub watch %s, gridsub cancel %s)\n", id, id, id)
		}
		return nil, &exitError{exitInterrupted, fmt.Errorf("interrupted: stopped following %s; the job goes on in the daemon", id)}
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		j, err := c.Job(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return stopped()
			}
			return nil, clientErr(err)
		}
		p.update(j, c.now(ctx))
		if j.State.Final() {
			p.done(j)
			return j, nil
		}
		select {
		case <-ctx.Done():
			return stopped()
		case <-tk.C:
		}
	}
}

// report prints a job that ended (summary, or JSON with its events) and
// returns the exit status its state calls for. sim: its times are on the
// simulated clock.
func report(g *globals, j *bridge.Job, sim bool) error {
	if g.json() {
		if err := writeJSON(g.stdout, toJSON(j, true)); err != nil {
			return err
		}
	} else {
		fmt.Fprint(g.stdout, summaryText(j, sim))
	}
	if j.State != bridge.Completed {
		return &exitError{exitJobFailed, fmt.Errorf("job %s %s: %s", j.ID, j.State, j.Reason)}
	}
	return nil
}

// noDaemonAdvice says what to do when no daemon answers on the socket. It
// only advises starting one when nothing holds the state directory: a
// daemon that holds it but does not answer (starting, stuck, or serving
// another socket path) would only make a second one fail, and one that
// did not would run every job twice.
func noDaemonAdvice(stateDir string) string {
	if stateDir != "" {
		held, pid, err := daemon.LockHolder(stateDir)
		switch {
		case err != nil:
			return fmt.Sprintf("cannot tell whether a daemon holds %s (%v); check with `ps` before starting one", stateDir, err)
		case held:
			who := "a process"
			if pid > 0 {
				who = fmt.Sprintf("gridsub pid %d", pid)
			}
			return fmt.Sprintf("but %s holds the state directory %s: it may still be starting, be stuck, or serve another socket path "+
				"(broker.socket, %s). Do not start a second daemon; wait, look at its log, or stop it (kill %s) and start again",
				who, stateDir, envSocket, pidText(pid))
		}
	}
	return fmt.Sprintf("start one with `gridsub serve &` (it finds its state directory and socket the same way: --config, %s, %s)",
		envStateDir, envSocket)
}

func pidText(pid int) string {
	if pid > 0 {
		return strconv.Itoa(pid)
	}
	return "<pid>"
}
