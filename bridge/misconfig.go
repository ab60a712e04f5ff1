package bridge

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/jobrules"
)

// Misconfiguration named: a partition, queue or account that a site does
// not have is reported where the user looks, naming the site, the field
// and what the site offers.
//
//   - A site whose own configured partition or queue is missing fails its
//     Info with backends.ErrRejected and backends.MissingName's text. It is
//     not "down": a dry run excludes it with that text, and a job that
//     only it could run waits with it as its reason (holdUnreachable).
//   - A job whose SiteOptions name a partition or queue a site does not
//     list (as the site's last Info said) is refused at submission (and by
//     a dry run and `gridsub validate`) with a FieldError on
//     SiteOptions["site"].Partition. A site not known at submission is
//     checked again when the planner picks it (dispatch): the site is then
//     refused for the job with the same text, and the job is rejected with
//     it when no allowed site is left.
//   - An account is judged like a partition where the site's Info lists
//     the accounts the login user may charge (SiteInfo.Accounts: SLURM
//     with an accounting database): a job's SiteOptions account the site
//     does not list is refused at submission, by a dry run and `gridsub
//     validate`, and at dispatch, naming SiteOptions["site"].Account; a
//     site whose own configured account is not listed fails its Info (the
//     site is misconfigured, not down). Where the site cannot say, an
//     account is named from the site's own refusal (refusalField): the
//     refusal recorded names the field (the job's SiteOptions, or the
//     site's configuration) and the account.

// siteOffer is what a site offers by name, as its last Info said.
type siteOffer struct {
	kind  string   // "slurm", "pbs", "sim"…
	parts []string // partitions or queues, the default first; nil = not known
	accts []string // accounts the login user may charge; nil = not known
}

// offered records the kind, partitions or queues and accounts of site s
// from its Info (none listed: not known). The ledger's lock held.
func (st *siteTable) offered(s int, kind string, parts, accts []string) {
	if st.offers == nil {
		st.offers = make([]siteOffer, len(st.sites))
	}
	if len(parts) == 0 {
		return
	}
	o := &st.offers[s]
	o.kind = kind
	o.parts = append(o.parts[:0], parts...)
	o.accts = nil
	if len(accts) > 0 {
		o.accts = append([]string{}, accts...)
	}
}

// partitionWord is what the site's kind calls a partition.
func partitionWord(kind string) string {
	if kind == "pbs" {
		return "queue"
	}
	return "partition"
}

// optionMisfit is one SiteOptions entry naming what its site lacks.
type optionMisfit struct {
	site  string
	field string // "SiteOptions[\"siteA\"].Partition"
	msg   string
}

// optionMisfits lists the sites among only (nil: every site of req's
// SiteOptions) whose partition or queue, or account, in req's SiteOptions
// the site does not list. A site whose partitions (accounts) are not known
// is not judged on them. The ledger's lock held.
func (st *siteTable) optionMisfits(req *Request, only []string) []optionMisfit {
	return misfits(req, only, func(name string) (siteOffer, bool) {
		s, ok := st.siteIdx[name]
		if !ok || st.offers == nil || st.offers[s].parts == nil {
			return siteOffer{}, false
		}
		off := st.offers[s]
		if st.ids != nil && req.Owner != "" && req.Owner != st.self && st.ids.Has(name, req.Owner) {
			// The accounts listed are the site login's; the owner logs
			// in as someone else there, whose accounts the site names
			// when it refuses one.
			off.accts = nil
		}
		return off, true
	})
}

// misfits is optionMisfits over any record of what the sites offer.
func misfits(req *Request, only []string, offer func(site string) (siteOffer, bool)) []optionMisfit {
	var out []optionMisfit
	for _, name := range slices.Sorted(maps.Keys(req.SiteOptions)) {
		o := req.SiteOptions[name]
		if (o.Partition == "" && o.Account == "") || (only != nil && !slices.Contains(only, name)) {
			continue
		}
		off, ok := offer(name)
		if !ok {
			continue
		}
		if o.Partition != "" && !slices.Contains(off.parts, o.Partition) {
			out = append(out, optionMisfit{site: name, field: "SiteOptions[" + strconv.Quote(name) + "].Partition",
				msg: fmt.Sprintf("site %s has no %s %q; it has: %s", name, partitionWord(off.kind), o.Partition, backends.Offers(off.parts))})
		}
		if o.Account != "" && off.accts != nil && !slices.Contains(off.accts, o.Account) {
			out = append(out, optionMisfit{site: name, field: "SiteOptions[" + strconv.Quote(name) + "].Account",
				msg: fmt.Sprintf("site %s has no account %q for its login user; it has: %s", name, o.Account, backends.Offers(off.accts))})
		}
	}
	return out
}

// CheckSiteOptions checks req's SiteOptions against the sites' Info, by
// site name (a site without an Info, or whose Info lists no partitions, is
// not judged; one that lists no accounts is not judged on them): a
// RequestError with a FieldError on each SiteOptions["site"].Partition or
// .Account the site does not have, naming the site and what it has; nil
// when every one is there. It is the check Submit
// applies to the sites it has seen, for `gridsub validate`.
func CheckSiteOptions(req *Request, infos map[string]*backends.SiteInfo) error {
	return misfitError(misfits(req, nil, func(name string) (siteOffer, bool) {
		in := infos[name]
		if in == nil || len(in.Partitions) == 0 {
			return siteOffer{}, false
		}
		return siteOffer{kind: in.Kind, parts: in.Partitions, accts: in.Accounts}, true
	}))
}

// misfitError is the RequestError of misfits, or nil.
func misfitError(mis []optionMisfit) error {
	var p problems
	for _, m := range mis {
		p = append(p, &FieldError{Field: m.field, Msg: m.msg, Err: jobrules.ErrValue})
	}
	if len(p) == 0 {
		return nil
	}
	return RequestError(p)
}

// Misconfigured reports whether err, from a site's Info, is the site
// refusing its own configuration (a partition or queue it does not have),
// not a site that does not answer.
func Misconfigured(err error) bool { return misconfigured(err) }

// checkOptions is the submission's check of SiteOptions against what the
// sites offer: a RequestError naming each field, or nil. The ledger's lock
// held.
func (st *siteTable) checkOptions(req *Request) error {
	return misfitError(st.optionMisfits(req, nil))
}

// downWhy says why site s is out of the cycle's snapshot: the site's own
// refusal of its configuration (a missing partition or queue), or that its
// state could not be read, with the error. The ledger's lock held.
func (st *siteTable) downWhy(s int) string {
	err := st.infoErr[s]
	switch {
	case err == nil:
		return "down: its state could not be read"
	case misconfigured(err):
		return "misconfigured: " + strings.TrimPrefix(err.Error(), backends.ErrRejected.Error()+": ")
	}
	return "down: its state could not be read: " + err.Error()
}

// misconfigured reports whether a site's Info error is the site refusing
// its configuration, not a site that does not answer.
func misconfigured(err error) bool {
	return errors.Is(err, backends.ErrRejected) && !backends.Retryable(err)
}

// refuseMisfits refuses job j at the chosen sites whose partition or queue
// it names is not there, before anything is submitted: a Refusal with the
// text naming site, field and offers, and an event. It reports whether any
// chosen site was refused (the job is then not dispatched this cycle: it
// is planned again on the sites left, or rejected when none is). The
// ledger's lock held.
func (dp *dispatcher) refuseMisfits(j *Job, chosen []string, now time.Time) bool {
	if len(j.Req.SiteOptions) == 0 {
		return false
	}
	mis := dp.optionMisfits(&j.Req, chosen)
	if len(mis) == 0 {
		return false
	}
	for _, m := range mis {
		if !slices.ContainsFunc(j.Refused, func(r Refusal) bool { return r.Site == m.site }) {
			j.Refused = append(j.Refused, Refusal{Site: m.site, Why: m.field + ": " + m.msg, Time: now})
			dp.note(j, now, "refused", m.site, m.field+": "+m.msg)
		}
	}
	if i := slices.Index(dp.queue, j.ID); i >= 0 {
		dp.pq[i] = dp.policyJob(j)
	}
	return true
}

// accountRefusedRe and partitionRefusedRe are the batch systems' words for
// an account or a partition they do not have: sbatch's "Invalid account or
// account/partition combination specified" and "invalid partition
// specified", qsub's "Unknown queue" and "Bad Account".
var (
	accountRefusedRe   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)invalid account|bad account|unknown account`) })
	partitionRefusedRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)invalid partition|unknown queue`) })
)

// refusalField prefixes a site's refusal of job j with the field it names,
// when the site's words say which: the job's SiteOptions entry for the
// site when it sets one, else the site's configuration. "" when the
// refusal names no field.
func refusalField(j *Job, site string, err error) string {
	msg := err.Error()
	o := j.Req.SiteOptions[site]
	switch {
	case accountRefusedRe().MatchString(msg):
		if o.Account != "" {
			return fmt.Sprintf("SiteOptions[%q].Account %q: site %s does not take it", site, o.Account, site)
		}
		return fmt.Sprintf("the account of sites.%s.account (or the login's default): site %s does not take it", site, site)
	case partitionRefusedRe().MatchString(msg):
		if o.Partition != "" {
			return fmt.Sprintf("SiteOptions[%q].Partition %q: site %s does not have it", site, o.Partition, site)
		}
		return fmt.Sprintf("sites.%s.partition: site %s does not have it", site, site)
	}
	return ""
}
