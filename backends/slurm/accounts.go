package slurm

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends/sshbatch"
)

// AccountsEvery is how often the accounts of the login user are read
// again (`sacctmgr show assoc`): associations change rarely, and the
// command is one more in the site's budget.
const AccountsEvery = 30 * time.Minute

// AssocTimeout bounds sacctmgr at the site (`timeout`): a slurmdbd that
// does not answer makes it exit 124 rather than hold the capacity report
// (and make the whole site look unreachable).
const AssocTimeout = 10 * time.Second

// AssocArgv lists the accounts user may charge (one per line, once per
// association: an account may repeat, one line per partition).
func AssocArgv(user string) []string {
	return append([]string{"timeout", strconv.Itoa(int(AssocTimeout / time.Second))},
		quietEnv("sacctmgr", "-n", "-P", "show", "assoc", "user="+user, "format=account")...)
}

// assocRetry is how soon accounts are asked again after sacctmgr failed
// for a reason that may pass (slurmdbd down or slow).
const assocRetry = 2 * time.Minute

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
// is not asked again, and one whose sacctmgr fails otherwise (slurmdbd
// down) keeps what it said last and is asked again after assocRetry,
// doubling with each failure up to AccountsEvery.
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
	r, err := x.RunAside(ctx, AssocArgv(x.User), nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		msg := Message(r)
		d.mu.Lock()
		defer d.mu.Unlock()
		if strings.Contains(msg, "accounting_storage") {
			d.noAssoc = true
			x.Log.Info("the site lists no accounts (sacctmgr); accounts are named only from its refusals", "err", msg)
			return nil, nil
		}
		d.assocFails++
		wait := min(assocRetry<<min(d.assocFails-1, 8), AccountsEvery)
		d.acctsAt = now.Add(wait - AccountsEvery)
		x.Log.Warn("cannot read the login user's accounts now; asking again later", "exit", r.ExitCode, "err", msg, "in", wait)
		return d.accts, nil
	}
	accts = ParseAssoc(r.Stdout)
	d.mu.Lock()
	d.accts, d.acctsAt, d.assocFails = accts, now, 0
	d.mu.Unlock()
	return accts, nil
}
