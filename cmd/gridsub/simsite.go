package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/internal/config"
	"github.com/gridsub/gridsub/simbackend/sshsite"
)

// simsiteFlags are the flags of "gridsub simsite serve" and "up".
type simsiteFlags struct {
	name, dialect, listen, dir, keys, user string
	nodes, cores                           int
	scale                                  float64
	minJobAge                              time.Duration
}

func newSimsiteCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "simsite",
		Short: "Serve simulated SLURM or PBS sites over SSH (for tests and load runs)",
		Long: `A simulated site is a batch system of its own (the simulator's FCFS + EASY
scheduler on scaled wall time) behind a real SSH server on loopback: its login
shell is a real /bin/sh whose PATH starts with the site's own sbatch, squeue,
... or qsub, qstat, ... commands, its jobs run as real processes, and SFTP is
confined to the site's home. The ordinary slurm and pbs backends drive it as
they drive a real cluster: point a "kind: slurm" or "kind: pbs" site of a
config at its address. docs/simsite.md has the details.`,
	}
	c.AddCommand(newSimsiteServeCmd(g), newSimsiteUpCmd(g), &cobra.Command{
		Use:                "cmd SOCKET COMMAND [ARG...]",
		Short:              "The batch commands of a simulated site (run by its bin/ scripts)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			os.Exit(sshsite.CmdMain(args))
			return nil
		},
	})
	return c
}

func newSimsiteServeCmd(g *globals) *cobra.Command {
	f := &simsiteFlags{}
	c := &cobra.Command{
		Use:   "serve --dialect slurm|pbs --nodes N --cores C --dir DIR --authorized-keys FILE",
		Short: "Serve one simulated site until SIGTERM",
		Long: `Serve starts one simulated site and prints its address, its known_hosts line
and "ready" (also written to DIR/known_hosts). It stops cleanly on SIGTERM or
Ctrl-C, killing the jobs still running.

Its home (DIR/home) is the login directory and the SFTP root; its batch
commands are in DIR/bin (a pbs site's bin_dir).`,
		Example: `  gridsub simsite serve --dialect pbs --name p1 --nodes 16 --cores 8 --dir /tmp/p1 \
      --authorized-keys ~/.ssh/id_ed25519.pub --listen 127.0.0.1:2222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := sshsite.ReadAuthorizedKeys(f.keys)
			if err != nil {
				return usageErr(fmt.Errorf("--authorized-keys: %w", err))
			}
			site, err := startSimsite(cmd.Context(), g, f, keys)
			if err != nil {
				return err
			}
			defer site.Close()
			kh := filepath.Join(f.dir, "known_hosts")
			if err := site.WriteKnownHosts(kh); err != nil {
				return fmt.Errorf("simsite: %w", err)
			}
			fmt.Fprintf(g.stdout, "simsite %s dialect=%s nodes=%d cores=%d addr=%s home=%s bin=%s\n",
				f.name, f.dialect, f.nodes, site.Config().Cores, site.Addr(), site.Home(), site.Bin())
			fmt.Fprintf(g.stdout, "known_hosts: %s\nready\n", site.KnownHosts())
			<-cmd.Context().Done()
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.name, "name", "simsite", "site name (node names and the PBS server name derive from it)")
	fl.StringVar(&f.dialect, "dialect", "", "slurm or pbs (required)")
	fl.IntVar(&f.nodes, "nodes", 4, "nodes")
	fl.IntVar(&f.cores, "cores", 1, "cores per node")
	fl.Float64Var(&f.scale, "scale", 1, "site seconds per wall second (queue waits, walltimes, reservations); jobs' processes run in real time")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "SSH address")
	fl.StringVar(&f.dir, "dir", "", "the site's directory (created; required)")
	fl.StringVar(&f.keys, "authorized-keys", "", "public keys allowed to log in (authorized_keys format; required)")
	fl.StringVar(&f.user, "user", "", "login user (default: the current user)")
	fl.DurationVar(&f.minJobAge, "min-job-age", 5*time.Minute, "site time an ended job stays in squeue/qstat without -x")
	return c
}

func startSimsite(ctx context.Context, g *globals, f *simsiteFlags, keys []ssh.PublicKey) (*sshsite.Site, error) {
	if f.dialect != sshsite.SLURM && f.dialect != sshsite.PBS {
		return nil, usageErr(fmt.Errorf("--dialect must be slurm or pbs, got %q", f.dialect))
	}
	if f.dir == "" {
		return nil, usageErr(errors.New("--dir is required"))
	}
	if host, _, err := net.SplitHostPort(f.listen); err != nil || !net.ParseIP(host).IsLoopback() {
		return nil, usageErr(fmt.Errorf("--listen %q must be a loopback address (127.0.0.1:PORT): a simulated site's login shell is not a sandbox", f.listen))
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("simsite: cannot find the gridsub executable for the batch commands: %w", err)
	}
	site, err := sshsite.Start(ctx, sshsite.Config{Name: f.name, Dialect: f.dialect, Nodes: f.nodes, Cores: f.cores,
		Scale: f.scale, Dir: f.dir, Listen: f.listen, User: f.user, AuthorizedKeys: keys, Exe: exe,
		ExeArgs: []string{"simsite", "cmd"}, MinJobAge: f.minJobAge, Logger: g.logger()})
	if errors.Is(err, sshsite.ErrConfig) {
		return nil, usageErr(err)
	}
	return site, err
}

func newSimsiteUpCmd(g *globals) *cobra.Command {
	f := &simsiteFlags{}
	c := &cobra.Command{
		Use:   "up --config GRID.yaml --dir DIR",
		Short: "Serve every loopback slurm/pbs site of a config as a simulated site, until SIGTERM",
		Long: `Up reads the --config file and, in this one process, serves each site of
kind slurm or pbs whose ssh.host is a loopback address as a simulated site of
that dialect: its nodes and cores_per_node, listening on ssh.port, in
DIR/<name>, for ssh.user, letting in the public key <ssh.key_file>.pub (the
key pair is generated when key_file does not exist yet). The config and the
served grid so agree by construction; a site whose remote_dir is not below
DIR/<name>/home, or a pbs site whose bin_dir is not DIR/<name>/bin, is an
error naming it. The known_hosts lines of all sites are written to each
site's ssh.known_hosts file. It prints one line per site, then "ready".

configs/grid50.yaml is such a grid (scripts/grid50.sh start|stop|status).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return simsiteUp(cmd.Context(), g, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.dir, "dir", "", "directory holding one directory per site (required)")
	fl.Float64Var(&f.scale, "scale", 1, "site seconds per wall second, for every site")
	fl.DurationVar(&f.minJobAge, "min-job-age", 5*time.Minute, "site time an ended job stays in squeue/qstat without -x")
	return c
}

func simsiteUp(ctx context.Context, g *globals, f *simsiteFlags) error {
	if g.config == "" {
		return usageErr(errors.New("simsite up needs --config: the grid to serve"))
	}
	if f.dir == "" {
		return usageErr(errors.New("--dir is required"))
	}
	cfg, err := config.Load(g.config)
	if err != nil {
		return usageErr(err)
	}
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return usageErr(err)
	}
	var sites []*sshsite.Site
	defer func() {
		for _, s := range sites {
			s.Close()
		}
	}()
	known := map[string][]string{}
	for i, s := range cfg.Sites {
		if (s.Kind != "slurm" && s.Kind != "pbs") || s.SSH == nil || !net.ParseIP(s.SSH.Host).IsLoopback() {
			continue
		}
		where := fmt.Sprintf("sites[%d] (%s)", i, s.Name)
		sd := filepath.Join(dir, s.Name)
		if rel, err := filepath.Rel(filepath.Join(sd, "home"), s.RemoteDir); err != nil || strings.HasPrefix(rel, "..") {
			return usageErr(fmt.Errorf("%s: remote_dir %q must be below %s", where, s.RemoteDir, filepath.Join(sd, "home")))
		}
		if s.Kind == "pbs" && filepath.Clean(s.BinDir) != filepath.Join(sd, "bin") {
			return usageErr(fmt.Errorf("%s: bin_dir %q must be %s (the served site's commands)", where, s.BinDir, filepath.Join(sd, "bin")))
		}
		if s.SSH.KeyFile == "" || s.SSH.KnownHosts == "" {
			return usageErr(fmt.Errorf("%s: ssh.key_file and ssh.known_hosts are required", where))
		}
		pub := s.SSH.KeyFile + ".pub"
		if _, err := os.Stat(s.SSH.KeyFile); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(s.SSH.KeyFile), 0o700); err != nil {
				return err
			}
			if _, err := sshsite.NewClientKey(s.SSH.KeyFile); err != nil {
				return fmt.Errorf("%s: generating %s: %w", where, s.SSH.KeyFile, err)
			}
		}
		keys, err := sshsite.ReadAuthorizedKeys(pub)
		if err != nil {
			return usageErr(fmt.Errorf("%s: ssh.key_file's public half: %w", where, err))
		}
		sf := &simsiteFlags{name: s.Name, dialect: s.Kind, nodes: s.Nodes, cores: s.CoresPerNode, scale: f.scale,
			listen: net.JoinHostPort(s.SSH.Host, fmt.Sprint(s.SSH.Port)), dir: sd, user: s.SSH.User, minJobAge: f.minJobAge}
		site, err := startSimsite(ctx, g, sf, keys)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		sites = append(sites, site)
		known[s.SSH.KnownHosts] = append(known[s.SSH.KnownHosts], site.KnownHosts())
		fmt.Fprintf(g.stdout, "simsite %s dialect=%s nodes=%d cores=%d addr=%s\n", s.Name, s.Kind, s.Nodes, site.Config().Cores, site.Addr())
	}
	if len(sites) == 0 {
		return usageErr(fmt.Errorf("%s has no slurm or pbs site on a loopback ssh.host to serve", g.config))
	}
	files := make([]string, 0, len(known))
	for kh := range known {
		files = append(files, kh)
	}
	sort.Strings(files)
	for _, kh := range files {
		if err := os.MkdirAll(filepath.Dir(kh), 0o700); err != nil {
			return err
		}
		tmp := kh + ".tmp"
		if err := os.WriteFile(tmp, []byte(strings.Join(known[kh], "\n")+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, kh); err != nil {
			return err
		}
	}
	fmt.Fprintf(g.stdout, "ready %d sites\n", len(sites))
	<-ctx.Done()
	return nil
}
