package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/backends/regularfile"
	"github.com/gridsub/gridsub/bridge/api"
)

// maxKeyFile bounds a key or certificate file the CLI reads.
const maxKeyFile = 64 << 10

// newCredentialsCmd is `gridsub credentials add|list|remove`: each user's
// own identity at a site (docs/users.md).
func newCredentialsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "credentials",
		Short: "Run your jobs at a site under your own login, key and account",
		Long: `By default every job runs at a site under the login the daemon's configuration
gives the site. With a credential of your own for a site, your jobs there are
submitted, watched, cancelled and fetched over an SSH connection of your own:
they run under your login and are charged to your account, and the site's own
permissions and limits apply to you.

The key is read here, by you, and handed to the daemon over its unix socket
(or TLS, or loopback); the daemon keeps it in a file of mode 0600 under
<state_dir>/credentials/<user>/<site>/, never in the job database, never in a
log, and never shows it again. It must be unencrypted (the daemon has nobody
to ask for a passphrase): make a key for gridsub alone and add its public half
to your authorized_keys at the site.

The site's host key is checked against the site's known_hosts as for the
site's own login. An administrator may manage another user's credentials
with --user.`,
	}
	var o struct {
		key, cert, remoteUser, account, remoteDir, user string
	}
	add := &cobra.Command{
		Use:   "add SITE --key FILE [--cert FILE] [--remote-user LOGIN] [--account NAME] [--remote-dir DIR]",
		Short: "Store your identity at a site (replacing any earlier one)",
		Example: `  ssh-keygen -t ed25519 -N '' -f ~/.ssh/gridsub-clusterA     # then add the .pub at clusterA
  gridsub credentials add clusterA --key ~/.ssh/gridsub-clusterA --account proj42
  gridsub credentials add clusterB --key ~/.ssh/id_ed25519 --cert ~/.ssh/id_ed25519-cert.pub --remote-user jdoe`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.key == "" {
				return usageErr(errors.New("--key FILE is required: the private key your jobs log in to the site with"))
			}
			key, err := regularfile.Read(o.key, maxKeyFile)
			if err != nil {
				return usageErr(fmt.Errorf("--key: %w", err))
			}
			req := api.CredentialRequest{User: o.user, Site: args[0], RemoteUser: o.remoteUser, Account: o.account, RemoteDir: o.remoteDir, Key: string(key)}
			if o.cert != "" {
				cert, err := regularfile.Read(o.cert, maxKeyFile)
				if err != nil {
					return usageErr(fmt.Errorf("--cert: %w", err))
				}
				req.Cert = string(cert)
			}
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			cr, err := c.AddCredential(cmd.Context(), req)
			if err != nil {
				return credentialErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, cr)
			}
			fmt.Fprintf(g.stdout, "%s's jobs at %s now run as %s (key %s%s%s)\n", cr.User, cr.Site, cr.Login(), cr.Fingerprint,
				map[bool]string{true: ", certificate " + cr.CertID}[cr.HasCert], map[bool]string{true: ", account " + cr.Account}[cr.Account != ""])
			return nil
		},
	}
	add.Flags().StringVar(&o.key, "key", "", "the private key file (OpenSSH or PEM, unencrypted)")
	add.Flags().StringVar(&o.cert, "cert", "", "an OpenSSH user certificate of that key (KEY-cert.pub)")
	add.Flags().StringVar(&o.remoteUser, "remote-user", "", "your login at the site (default: your user name)")
	add.Flags().StringVar(&o.account, "account", "", "the account charged for your jobs there that name none (default: the site's)")
	add.Flags().StringVar(&o.remoteDir, "remote-dir", "", "where your job directories go at the site (default: the site's remote_dir)")
	add.Flags().StringVar(&o.user, "user", "", "another user's credential (administrators)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List your site credentials (an administrator's lists everyone's); never the keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			l, err := c.Credentials(cmd.Context(), o.user)
			if err != nil {
				return credentialErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, l)
			}
			tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tSITE\tLOGIN\tACCOUNT\tKEY\tCERT\tADDED")
			for _, cr := range l {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cr.User, cr.Site, cr.Login(), dash(cr.Account), cr.Fingerprint, dash(cr.CertID),
					cr.Created.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&o.user, "user", "", "one user's credentials (administrators)")
	remove := &cobra.Command{
		Use:   "remove SITE",
		Short: "Remove your identity at a site: your jobs there go back to the site's configured login",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			cr, err := c.RemoveCredential(cmd.Context(), args[0], o.user)
			if err != nil {
				return credentialErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, cr)
			}
			fmt.Fprintf(g.stdout, "removed %s's credential at %s (login %s)\n", cr.User, cr.Site, cr.Login())
			return nil
		},
	}
	remove.Flags().StringVar(&o.user, "user", "", "another user's credential (administrators)")
	cmd.AddCommand(add, list, remove)
	return cmd
}

// credentialErr is a credential route's error: a refusal of what was
// asked (403, 400) is a usage error, the rest the client's.
func credentialErr(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != 404 {
		return usageErr(err)
	}
	return clientErr(err)
}

// dash is s, or "-" when it is empty (a table cell).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
