package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/internal/config"
)

// initFlags are the answers `gridsub config init` writes into a site.
type initFlags struct {
	kind, name, host, user, key, knownHosts, remoteDir, partition string
	port, nodes, cores                                            int
	// sshConfig is --ssh-config; resolved, what ssh -G said of --host
	// when it is an alias (its HostName differs, or it has a ProxyJump).
	sshConfig, hostName, proxyJump, certFile string
	resolved                                 bool
}

func newConfigCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Write a starter site configuration for your own cluster",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(newConfigInitCmd(g))
	return c
}

func newConfigInitCmd(g *globals) *cobra.Command {
	f := &initFlags{}
	c := &cobra.Command{
		Use:   "init FILE --host LOGIN-NODE",
		Short: "Write a starter site configuration for one SLURM or PBS cluster (never overwrites)",
		Long: `Config init writes FILE: a site configuration for one SLURM (or, with
--kind pbs, PBS) cluster that you reach with ssh — its login node, your user
name, your private key file and the known_hosts file against which its host
key is checked. It refuses to overwrite an existing FILE.

It contacts nothing: the host key is not fetched for you. It prints the
ssh-keyscan command that records it, to run yourself after checking the
fingerprint with your centre (a key taken blindly would let anyone on the path
pose as the cluster). There is no password field: login is by key file or
ssh-agent.

--host may be an alias of your ~/.ssh/config: gridsub asks OpenSSH (ssh -G)
what it means and writes what it resolved — the login node's port, user, key
and known_hosts (the flags you give win) — and keeps ssh_config in the file,
so that ProxyJump hops are reached as your own ssh reaches them. A setting
gridsub cannot honour (ProxyCommand, StrictHostKeyChecking no, ...) is refused
by name. --ssh-config FILE reads another file; --ssh-config none turns this off.

Then: gridsub --config FILE sites   (or export GRIDSUB_CONFIG=FILE), and
gridsub doctor SITE to walk the login path.`,
		Example: `  gridsub config init ~/.config/gridsub/sites.yaml --host login.hpc.example.org
  gridsub config init pbs.yaml --kind pbs --host pbs.example.org --user alice --partition workq
  gridsub config init sites.yaml --host mycluster     # a Host of ~/.ssh/config (ProxyJump and all)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.resolve(cmd); err != nil {
				return usageErr(fmt.Errorf("config init: %w", err))
			}
			return runConfigInit(g, f, args[0])
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.kind, "kind", config.KindSlurm, "the batch system: slurm or pbs")
	fl.StringVar(&f.name, "name", "", "the site's name in gridsub (default: the host's first label)")
	fl.StringVar(&f.host, "host", "", "the cluster's login node (required)")
	fl.IntVar(&f.port, "port", 22, "its ssh port")
	fl.StringVar(&f.user, "user", "", "your user name there (default $USER)")
	fl.StringVar(&f.key, "key", "", "your private key file (default ~/.ssh/id_ed25519; for ssh-agent, edit agent: true into the file)")
	fl.StringVar(&f.knownHosts, "known-hosts", "", "the known_hosts file the login node's key is checked against (default ~/.ssh/known_hosts)")
	fl.StringVar(&f.remoteDir, "remote-dir", "", "absolute directory at the site for gridsub's job directories (default /home/<user>/gridsub)")
	fl.StringVar(&f.partition, "partition", "", "the SLURM partition or PBS queue (default: the site's default)")
	fl.IntVar(&f.nodes, "nodes", 0, "schedulable nodes (0: ask the site)")
	fl.IntVar(&f.cores, "cores-per-node", 1, "cores per node")
	fl.StringVar(&f.sshConfig, "ssh-config", "", "the OpenSSH client configuration --host is resolved in: a file, or none (default: ~/.ssh/config when ssh is installed)")
	return c
}

// resolve asks OpenSSH what --host means (ssh -G) and, when it is an
// alias, takes what the flags the user did not give from it.
func (f *initFlags) resolve(cmd *cobra.Command) error {
	if f.sshConfig == "none" || f.host == "" || !aliasRe().MatchString(f.host) || (f.user != "" && !userRe().MatchString(f.user)) {
		return nil // nothing to resolve, or check() says what is wrong
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		if f.sshConfig != "" {
			return fmt.Errorf("--ssh-config needs the OpenSSH client (apt-get install openssh-client)")
		}
		return nil
	}
	file := f.sshConfig
	if file == "" {
		file = transport.SSHConfigDefault
	} else if abs, err := filepath.Abs(file); err == nil {
		file, f.sshConfig = abs, abs
	}
	changed := cmd.Flags().Changed
	user, port := "", 0
	if changed("user") {
		user = f.user
	}
	if changed("port") {
		port = f.port
	}
	st, err := transport.SSHG(cmd.Context(), file, f.host, user, port)
	if err != nil {
		return err
	}
	pj := st.One("proxyjump")
	if pj == "none" {
		pj = ""
	}
	if f.sshConfig == "" && st.One("hostname") == f.host && pj == "" {
		return nil // not an alias: the flags as given
	}
	if err := st.Refuse(f.host); err != nil {
		return err
	}
	f.resolved, f.hostName, f.proxyJump = true, st.One("hostname"), pj
	if f.sshConfig == "" {
		f.sshConfig = "default"
	}
	if !changed("user") {
		f.user = st.One("user")
	}
	if !changed("port") {
		if p, err := strconv.Atoi(st.One("port")); err == nil {
			f.port = p
		}
	}
	if ks := st.Existing("identityfile"); !changed("key") && len(ks) > 0 {
		f.key = ks[0]
	}
	if ks := st.Existing("userknownhostsfile"); !changed("known-hosts") && len(ks) > 0 {
		f.knownHosts = ks[0]
	}
	if cs := st.Existing("certificatefile"); len(cs) > 0 {
		f.certFile = cs[0]
	}
	return nil
}

// hostRe, userRe and nameRe bound what goes into the file and the shown
// command: no blanks, quotes or shell characters.
var (
	hostRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?$|^\[[0-9A-Fa-f:.]+\]$`)
	})
	userRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9._-]{0,63}$`) })
	nameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })
	// aliasRe is a Host alias of an ssh configuration.
	aliasRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`) })
)

func (f *initFlags) check() error {
	switch {
	case f.kind != config.KindSlurm && f.kind != config.KindPBS:
		return fmt.Errorf("--kind must be %s or %s, got %q", config.KindSlurm, config.KindPBS, f.kind)
	case f.host == "":
		return errors.New("--host is required: the login node you reach with ssh (e.g. --host login.hpc.example.org)")
	case !hostRe().MatchString(f.host) && !(f.resolved && aliasRe().MatchString(f.host)):
		return fmt.Errorf("--host %q is not a host name or address", f.host)
	case f.port < 1 || f.port > 65535:
		return fmt.Errorf("--port must be 1..65535, got %d", f.port)
	case !userRe().MatchString(f.user):
		return fmt.Errorf("--user %q is not a user name (set --user)", f.user)
	case f.name != "" && !nameRe().MatchString(f.name):
		return fmt.Errorf("--name %q: want letters, digits, '.', '_' or '-' (at most 64)", f.name)
	case f.remoteDir != "" && !filepath.IsAbs(f.remoteDir):
		return fmt.Errorf("--remote-dir %q must be absolute", f.remoteDir)
	case f.nodes < 0 || f.cores < 1:
		return fmt.Errorf("--nodes must be >= 0 and --cores-per-node >= 1, got %d and %d", f.nodes, f.cores)
	case strings.ContainsAny(f.key+f.knownHosts+f.remoteDir+f.partition+f.sshConfig+f.proxyJump+f.certFile, "\n\"'\\$"):
		return errors.New("--key, --known-hosts, --remote-dir, --partition and the ssh configuration's files may not hold quotes, '$', '\\' or newlines")
	}
	return nil
}

func runConfigInit(g *globals, f *initFlags, path string) error {
	home, _ := os.UserHomeDir()
	if f.user == "" {
		f.user = os.Getenv("USER")
	}
	if f.key == "" {
		f.key = filepath.Join(home, ".ssh", "id_ed25519")
	}
	if f.knownHosts == "" {
		f.knownHosts = filepath.Join(home, ".ssh", "known_hosts")
	}
	if err := f.check(); err != nil {
		return usageErr(fmt.Errorf("config init: %w", err))
	}
	if f.name == "" {
		f.name, _, _ = strings.Cut(strings.Trim(f.host, "[]"), ".")
		if !nameRe().MatchString(f.name) {
			f.name = "mysite"
		}
	}
	if f.remoteDir == "" {
		f.remoteDir = "/home/" + f.user + "/gridsub"
	}
	for _, p := range []*string{&f.key, &f.knownHosts} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	text := f.render()
	// O_EXCL: an existing file (or a link planted at the name) is never
	// overwritten or followed.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return usageErr(fmt.Errorf("config init: %w", err))
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return usageErr(fmt.Errorf("config init: %s exists; not overwritten (remove it or choose another file)", path))
	}
	if err != nil {
		return usageErr(fmt.Errorf("config init: %w", err))
	}
	if _, err := out.WriteString(text); err != nil {
		out.Close()
		os.Remove(path)
		return &exitError{exitInternal, fmt.Errorf("config init: writing %s: %w", path, err)}
	}
	if err := out.Close(); err != nil {
		return &exitError{exitInternal, fmt.Errorf("config init: writing %s: %w", path, err)}
	}
	fmt.Fprintf(g.stdout, "wrote %s: site %s (%s) at %s@%s:%d\n", path, f.name, f.kind, f.user, f.host, f.port)
	if f.resolved {
		fmt.Fprintf(g.stdout, "  %s resolved by ssh -G (%s): HostName %s", f.host, f.sshConfig, f.hostName)
		if f.proxyJump != "" {
			fmt.Fprintf(g.stdout, ", ProxyJump %s", f.proxyJump)
		}
		fmt.Fprintf(g.stdout, "\n  check the whole path with: gridsub --config %s doctor %s\n", transport.Quote([]string{path}), f.name)
	}
	fmt.Fprintln(g.stdout)
	fmt.Fprintf(g.stdout, "gridsub checks the login node's host key against %s and never accepts an unknown one.\n", f.knownHosts)
	fmt.Fprintf(g.stdout, "If you have not logged in there with ssh before, record its key yourself (nothing was run):\n\n")
	fmt.Fprintf(g.stdout, "  %s\n", keyscanCommand(f))
	fmt.Fprintf(g.stdout, "  ssh-keygen -lf %s   # compare the fingerprints with the ones your centre publishes\n\n", transport.Quote([]string{f.knownHosts}))
	fmt.Fprintf(g.stdout, "Then: gridsub --config %s sites   (or export GRIDSUB_CONFIG=%s)\n", transport.Quote([]string{path}), transport.Quote([]string{path}))
	return nil
}

// keyscanCommand is the command that appends the login node's host keys
// to the known_hosts file (shown, never run).
func keyscanCommand(f *initFlags) string {
	argv := []string{"ssh-keyscan"}
	if f.port != 22 {
		argv = append(argv, "-p", strconv.Itoa(f.port))
	}
	host := f.host
	if f.resolved {
		host = f.hostName
	}
	argv = append(argv, host)
	cmd := transport.Quote(argv) + " >> " + transport.Quote([]string{f.knownHosts})
	if f.proxyJump != "" {
		// ssh-keyscan cannot go through jump hosts: let OpenSSH show the keys.
		cmd = "ssh " + transport.Quote([]string{f.host}) + " true   # through ProxyJump: confirm each fingerprint ssh shows"
	}
	return cmd
}

// render is the configuration file.
func (f *initFlags) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# A gridsub site configuration written by `gridsub config init`.\n")
	fmt.Fprintf(&b, "# Use it with: gridsub --config THIS-FILE ... (or GRIDSUB_CONFIG). Reference: configs/local-slurm.yaml.\n")
	fmt.Fprintf(&b, "# No password belongs here: login is by key file (or ssh-agent: agent: true).\n")
	fmt.Fprintf(&b, "sites:\n")
	fmt.Fprintf(&b, "  - name: %s\n    kind: %s\n", f.name, f.kind)
	fmt.Fprintf(&b, "    nodes: %d            # 0: ask the site\n", f.nodes)
	fmt.Fprintf(&b, "    cores_per_node: %d\n", f.cores)
	fmt.Fprintf(&b, "    h: 1.0               # speed relative to the reference machine (> 1: slower)\n")
	if f.partition != "" {
		fmt.Fprintf(&b, "    partition: %q\n", f.partition)
	} else {
		fmt.Fprintf(&b, "    # partition: batch   # the %s; default: the site's default\n", map[string]string{config.KindSlurm: "partition", config.KindPBS: "queue"}[f.kind])
	}
	fmt.Fprintf(&b, "    remote_dir: %q\n", f.remoteDir)
	fmt.Fprintf(&b, "    ssh:\n")
	fmt.Fprintf(&b, "      host: %q\n      port: %d\n      user: %q\n", f.host, f.port, f.user)
	fmt.Fprintf(&b, "      key_file: %q\n", f.key)
	fmt.Fprintf(&b, "      known_hosts: %q   # %s\n", f.knownHosts, keyscanCommand(f))
	if f.resolved {
		fmt.Fprintf(&b, "      ssh_config: %q   # host is resolved by ssh -G: HostName %s", f.sshConfig, f.hostName)
		if f.proxyJump != "" {
			fmt.Fprintf(&b, ", ProxyJump %s (each hop as your ssh reaches it)", f.proxyJump)
		}
		fmt.Fprintln(&b)
		if f.certFile != "" {
			fmt.Fprintf(&b, "      cert_file: %q\n", f.certFile)
		}
	}
	return b.String()
}
