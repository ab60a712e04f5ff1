package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
)

func newLoginCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "login SITE",
		Short: "Answer a site's one-time password or key passphrase for the running daemon",
		Long: `Login logs the running daemon (gridsub serve) in to SITE when the site asks
something only you can answer: a one-time password (keyboard-interactive MFA,
a Duo-style "1" for a push) or the passphrase of an encrypted key file.

The questions come from the site through the daemon and are asked here, on
your terminal (secrets without echo); the answers go to the daemon over its
socket and are never written anywhere. The daemon then keeps the
authenticated connection open with keepalives for as long as the site allows
and sends every command through it. A key's passphrase is kept in the
daemon's memory for its lifetime; a one-time password is used once.

When that connection drops, the site shows "needs login" in gridsub sites:
its jobs keep their state and nothing is moved elsewhere because of it; run
gridsub login SITE again. With stdin not a terminal, answers are read one
per line from stdin (for scripts; mind where the secret comes from).`,
		Example: `  gridsub login hpc1
  gridsub sites          # the site shows "ok" again`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := mustConnect(ctx, g)
			if err != nil {
				return err
			}
			p := newTermPrompter(cmd.InOrStdin(), g.stderr)
			req := api.LoginRequest{}
			for {
				rep, err := c.SiteLogin(ctx, args[0], req)
				if err != nil {
					return clientErr(fmt.Errorf("login to %s: %w", args[0], err))
				}
				if rep.Done {
					if rep.Already {
						fmt.Fprintf(g.stdout, "%s is connected; nothing to answer\n", args[0])
					} else {
						fmt.Fprintf(g.stdout, "logged in to %s; the daemon keeps the connection\n", args[0])
					}
					return nil
				}
				if rep.Challenge == nil {
					return &exitError{exitInternal, errors.New("the daemon answered neither a question nor done")}
				}
				ans, err := p.Prompt(ctx, *rep.Challenge)
				if err != nil {
					return &exitError{exitInternal, fmt.Errorf("login to %s: %w", args[0], err)}
				}
				req = api.LoginRequest{Session: rep.Session, Answers: ans}
			}
		},
	}
}

// promptOnTerminal lets the in-process sites of spec ask on the terminal
// what their SSH login needs from a person (a one-time password, a key
// passphrase), when stdin is a terminal; otherwise such a site shows
// "needs login". Commands that run the broker in process call it; the
// daemon does not (its logins come through gridsub login).
func promptOnTerminal(spec *assemble.Spec, g *globals) {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return
	}
	p := newTermPrompter(os.Stdin, g.stderr)
	for i := range spec.Sites {
		if b := spec.Sites[i].Backend; b != nil {
			b.Prompter = p
		}
	}
}

// termPrompter asks a Challenge's questions on the terminal (secrets
// without echo), or reads the answers one per line when in is not a
// terminal. Nothing it reads is logged.
type termPrompter struct {
	mu  sync.Mutex
	in  io.Reader
	fd  int // -1: not a terminal
	rd  *bufio.Reader
	out io.Writer
}

func newTermPrompter(in io.Reader, out io.Writer) *termPrompter {
	p := &termPrompter{in: in, fd: -1, out: out}
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.fd = int(f.Fd())
	} else {
		p.rd = bufio.NewReader(in)
	}
	return p
}

// Prompt implements transport.Prompter.
func (p *termPrompter) Prompt(ctx context.Context, c transport.Challenge) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.Instruction != "" || c.Name != "" {
		fmt.Fprintf(p.out, "%s\n", strings.TrimSpace(c.Name+" "+c.Instruction))
	}
	fmt.Fprintf(p.out, "[%s]\n", c.Target)
	var ans []string
	for _, q := range c.Questions {
		fmt.Fprint(p.out, q.Text)
		var line string
		var err error
		switch {
		case p.fd >= 0 && !q.Echo:
			var b []byte
			b, err = term.ReadPassword(p.fd)
			fmt.Fprintln(p.out)
			line = string(b)
		case p.fd >= 0:
			line, err = bufio.NewReader(p.in).ReadString('\n')
		default:
			line, err = p.rd.ReadString('\n')
			if err == io.EOF && line != "" {
				err = nil
			}
			fmt.Fprintln(p.out)
		}
		if err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ans = append(ans, strings.TrimRight(line, "\r\n"))
	}
	return ans, nil
}
