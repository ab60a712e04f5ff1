package bridge

import (
	"strings"

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
