package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Refusal is a site that refused a job's submission for good: its batch
// system said no (resources it does not have, an unknown partition or
// account, a limit), an error that waiting cannot cure. The broker never
// places the job there again and plans it on the other sites.
type Refusal struct {
	Site string
	Why  string
	Time time.Time
}

// refusedBy reports whether err is a site's final no to a submission:
// not retryable, and not the broker's own context ending.
func refusedBy(err error) bool {
	return err != nil && !backends.Retryable(err) && !errors.Is(err, context.Canceled)
}

// refuse records the sites whose submission errs refused for good and
// reports whether the job may still run elsewhere: some allowed site has
// not refused it. An advance-reservation job is bound to its one site and
// never falls through. The ledger's lock held.
func (sm *submitter) refuse(j *Job, now time.Time, comps []Component, errs []error) bool {
	if j.Resv != nil {
		return false
	}
	added := false
	for k, err := range errs {
		if !refusedBy(err) || slices.ContainsFunc(j.Refused, func(r Refusal) bool { return r.Site == comps[k].Site }) {
			continue
		}
		why := err.Error()
		if f := refusalField(j, comps[k].Site, err); f != "" { // the field the site's words name (misconfig.go)
			why = f + ": " + why
		}
		j.Refused = append(j.Refused, Refusal{Site: comps[k].Site, Why: why, Time: now})
		added = true
	}
	if !added {
		return false
	}
	left := sm.allowedLeft(j)
	var refused []string
	for _, r := range j.Refused {
		refused = append(refused, r.Site)
	}
	if len(left) == 0 {
		return false
	}
	sm.note(j, now, "refused", "", fmt.Sprintf("%s refused the job; it is placed on the other allowed sites (%s) instead",
		strings.Join(refused, ", "), strings.Join(left, ", ")))
	return true
}

// refusedText is every refusal of the job: "siteA: ...; siteB: ...".
func refusedText(j *Job) string {
	var p []string
	for _, r := range j.Refused {
		p = append(p, r.Site+": "+r.Why)
	}
	return strings.Join(p, "; ")
}

// replan refreshes the policy's view of a queued job after its refusals
// changed. The ledger's lock held.
func (sm *submitter) replan(j *Job) {
	if i := slices.Index(sm.queue, j.ID); i >= 0 {
		sm.pq[i] = sm.policyJob(j)
	}
}
