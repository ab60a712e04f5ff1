package main

import (
	"errors"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge/api"
)

// newTokenCmd is `gridsub token create|list|revoke`: per-user bearer
// tokens for the TCP API, managed by an administrator (docs/users.md).
func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke per-user tokens for the TCP API (administrators)",
		Long: `A token lets a user reach the daemon over TCP (GRIDSUB_URL and GRIDSUB_TOKEN)
as themselves: they see, follow, fetch and cancel their own jobs only. On the
unix socket no token is needed: the daemon knows the user from the kernel
(its peer credentials).

Only an administrator manages tokens: root or the daemon's own user on the
socket, or the holder of an administrator's token. A token is shown once, when
it is made; the daemon keeps its SHA-256 in <state_dir>/tokens.json (mode 0600),
never in the job database, never in a log.`,
	}
	var user string
	var admin bool
	create := &cobra.Command{
		Use:     "create --user NAME [--admin]",
		Short:   "Make a token for a user and print it (once)",
		Example: "  gridsub token create --user alice\n  GRIDSUB_TOKEN=$(gridsub token create --user bob) ...",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if user == "" {
				return usageErr(errors.New("--user NAME is required: the account the token speaks for"))
			}
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			r, err := c.CreateToken(cmd.Context(), user, admin)
			if err != nil {
				return tokenErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, r)
			}
			fmt.Fprintln(g.stdout, r.Token)
			fmt.Fprintf(g.stderr, "gridsub: token %s for %s%s made; it is shown this once: keep it secret (GRIDSUB_TOKEN)\n",
				r.Info.ID, r.Info.User, map[bool]string{true: " (administrator)"}[r.Info.Admin])
			return nil
		},
	}
	create.Flags().StringVar(&user, "user", "", "the user the token speaks for (an account name)")
	create.Flags().BoolVar(&admin, "admin", false, "the token's holder administers the daemon: sees every job, manages tokens")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens (ids, users, dates; never the tokens)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			ts, err := c.Tokens(cmd.Context())
			if err != nil {
				return tokenErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, ts)
			}
			tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tUSER\tADMIN\tCREATED")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", t.ID, t.User, t.Admin, t.Created.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:     "revoke ID|user:NAME",
		Short:   "Revoke a token by its id, or every token of a user",
		Example: "  gridsub token revoke 3f9a1c0b2d4e\n  gridsub token revoke user:alice",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			gone, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return tokenErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, gone)
			}
			for _, t := range gone {
				fmt.Fprintf(g.stdout, "revoked %s (%s)\n", t.ID, t.User)
			}
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// tokenErr: a 403 is a usage error that says who may.
func tokenErr(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
		return usageErr(err)
	}
	return clientErr(err)
}

// newWhoamiCmd is `gridsub whoami`: who the daemon takes this client for.
func newWhoamiCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who the daemon takes you for, and whether you administer it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := mustConnect(cmd.Context(), g)
			if err != nil {
				return err
			}
			p, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return clientErr(err)
			}
			if g.json() {
				return writeJSON(g.stdout, p)
			}
			role := "user"
			if p.Admin {
				role = "administrator"
			}
			fmt.Fprintf(g.stdout, "%s (%s, known by %s)\n", p.User, role, p.Via)
			return nil
		},
	}
}
