package bridge

import (
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Losses, for the Reliability model: a component that a site lost (rather
// than one whose program failed) is a failure of the site, reported to
// Reliability.Lost. A site that stops answering is reported by detectDown
// (outage.go) instead.

// lossReasons are the reasons (compared lower-case, without '_' and ' ')
// with which a site reports a job it lost to a failure of its own: SLURM's
// NODE_FAIL / BOOT_FAIL states and its NodeDown reason, the simulator's
// NodeFail and SiteFailed (simbackend.Site.Fail).
var lossReasons = []string{"nodefail", "bootfail", "nodedown", "sitefailed"}

// IsSiteLoss reports whether a final component status is a loss caused by
// the site, not by the job: StateLost (the site has no record of the job and
// it left no exit-code file), or StateFailed whose reason names a node or
// site failure (see lossReasons). A non-zero exit, a timeout or a cancel is
// the job's (or a user's) doing and is no loss.
func IsSiteLoss(st backends.JobStatus) bool {
	switch st.State {
	case backends.StateLost:
		return true
	case backends.StateFailed:
		r := strings.NewReplacer("_", "", " ", "", "-", "").Replace(strings.ToLower(st.Reason))
		for _, w := range lossReasons {
			if strings.Contains(r, w) {
				return true
			}
		}
	}
	return false
}

// noteLoss reports a site loss at site s to the Reliability model, at most
// once per site per cycle time (a site failure that loses ten jobs is one
// failure, not ten). A site already counted down (its status calls fail)
// is not reported again, nor are the losses found in its first answer after
// an outage (outageOver). The ledger's lock held.
func (st *siteTable) noteLoss(s int, status backends.JobStatus, now time.Time) {
	if st.tiers == nil || st.tiers.Reliability == nil || !IsSiteLoss(status) {
		return
	}
	if st.lostAt == nil {
		st.lostAt = make([]time.Time, len(st.sites))
	}
	if st.lostAt[s].Equal(now) || (st.downSince != nil && !st.downSince[s].IsZero()) {
		return
	}
	st.lostAt[s] = now
	st.tiers.Reliability.Lost(st.sites[s].Name, now)
}

// outageOver is called when site s answers after an outage: the jobs it
// reports lost in this answer were lost in the outage, already reported
// as the site going down, so no loss is reported for them. The ledger's lock held.
func (st *siteTable) outageOver(s int, now time.Time) {
	if st.lostAt == nil {
		st.lostAt = make([]time.Time, len(st.sites))
	}
	st.lostAt[s] = now
}
