package slurm

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends/sshbatch"
)

// AccountsEvery is how often the accounts of the login user are read
// again (`sacctmgr show assoc`): associations change rarely, and the
// command is one more in the site's budget.
const AccountsEvery = 30 * time.Minute

// AssocArgv lists the accounts user may charge (one per line, once per
// association: an account may repeat, one line per partition).
func AssocArgv(user string) []string {
	return quietEnv("sacctmgr", "-n", "-P", "show", "assoc", "user="+user, "format=account")
}

// ParseAssoc reads AssocArgv's answer: the accounts, each once, sorted.
// nil when there are none (the site then cannot say).
func ParseAssoc(out []byte) []string {
	var accts []string
	for _, l := range lines(out) {
		a := strings.TrimSpace(l)
		if a != "" && batchName(a) && !slices.Contains(accts, a) {
			accts = append(accts, a)
		}
	}
	slices.Sort(accts)
	return accts
}

// batchName: an account SLURM could name (no spaces or separators).
func batchName(s string) bool {
	return !strings.ContainsAny(s, " \t|/\\'\"$`") && len(s) <= 64
}

// accounts returns the accounts the login user may charge at the site
// (nil: the site cannot say — no accounting database, no login user
// configured, or no association), read with the capacity report at most
// every AccountsEvery; a site whose sacctmgr says accounting is not there
// is not asked again.
func (d *dialect) accounts(ctx context.Context, x *sshbatch.Exec) ([]string, error) {
	now := d.cfg.Now()
	d.mu.Lock()
	accts, at, never := d.accts, d.acctsAt, d.noAssoc
	d.mu.Unlock()
	if never || x.User == "" {
		return nil, nil
	}
	if !at.IsZero() && now.Sub(at) >= 0 && now.Sub(at) < AccountsEvery {
		return accts, nil
	}
	r, err := x.Run(ctx, AssocArgv(x.User), nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		d.mu.Lock()
		d.noAssoc = true
		d.mu.Unlock()
		x.Log.Info("the site lists no accounts (sacctmgr); accounts are named only from its refusals", "err", Message(r))
		return nil, nil
	}
	accts = ParseAssoc(r.Stdout)
	d.mu.Lock()
	d.accts, d.acctsAt = accts, now
	d.mu.Unlock()
	return accts, nil
}
