package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// A copy set is the attempts of one job that run at the same time as
// alternatives of each other, and a rule for which one wins: the replicas
// a replicating planner asks for (policy.Replicate; each replica is one
// component, Component.Replica) and the copies of a QoS-tiered job
// (copies.go; a copy's components share Component.Copy). The winner's
// components stay in Job.Comps, the others are withdrawn. The track stage
// folds every set through trackSet; copyStates, winner and withdrawLosers
// are the rule's parts that both kinds share.

// winRule says which copy of a set wins.
type winRule int

const (
	// firstToStart: the first copy to run (or to have run) wins, and the
	// others are withdrawn at once — replicas, after Sabin's multi-queue
	// replication: a replica that never started cost nothing.
	firstToStart winRule = iota + 1
	// firstToSucceed: the first copy to complete wins; the others are
	// cancelled, and the job ends only once they are gone (SPEC.md §5's
	// high and low tiers).
	firstToSucceed
)

// setRule is the rule of a live job's copy set; ok is false when the job
// runs one copy.
func setRule(j *Job) (rule winRule, ok bool) {
	switch {
	case hasCopies(j):
		return firstToSucceed, true
	case len(j.Comps) > 0 && j.Comps[0].Replica:
		return firstToStart, true
	}
	return 0, false
}

// copyOf is the copy component c (at index k of its job) belongs to: a
// replica is a copy of its own, a QoS copy's components share Copy.
func copyOf(c Component, k int) int {
	if c.Replica {
		return k
	}
	return c.Copy
}

// copyState summarises one copy's components.
type copyState struct {
	has                   bool // the copy still has components
	n                     int
	done, failed, running bool
	passive, intent       bool
	site, reason          string
	exit                  int
}

// copyStates summarises each copy of j, by copy number.
func copyStates(j *Job) []copyState {
	var out []copyState
	for k, c := range j.Comps {
		n := copyOf(c, k)
		for len(out) <= n {
			out = append(out, copyState{n: len(out), done: true, running: true})
		}
		s := &out[n]
		s.has = true
		if s.site == "" {
			s.site = c.Site
		} else if !strings.Contains(s.site, c.Site) {
			s.site += "+" + c.Site
		}
		s.done = s.done && c.State == backends.StateCompleted
		s.running = s.running && (c.State == backends.StateRunning || c.State == backends.StateCompleted)
		s.passive = s.passive || c.Passive
		s.intent = s.intent || (!c.Passive && c.RemoteID == "" && !c.State.Final())
		if c.State.Final() && c.State != backends.StateCompleted && !s.failed {
			s.failed = true
			s.reason = fmt.Sprintf("ended %s", c.State)
			if c.State == backends.StateFailed && c.RemoteID != "" {
				s.reason += fmt.Sprintf(" with exit code %d", c.ExitCode)
			}
			if c.Reason != "" {
				s.reason += " (" + c.Reason + ")"
			}
			s.exit = c.ExitCode
		}
	}
	return out
}

// winner is the copy that wins under rule, the first in copy order; -1
// while none has. A passive copy (a backup held back) cannot win.
func winner(cs []copyState, rule winRule) int {
	for _, s := range cs {
		if !s.has || s.passive {
			continue
		}
		if (rule == firstToSucceed && s.done) || (rule == firstToStart && s.running) {
			return s.n
		}
	}
	return -1
}

// withdrawLosers returns the cancels of the components of every copy but
// win that still run at a site, each with why(c) as its reason; a loser's
// component never submitted (passive, or an intent) is marked cancelled
// instead: it never will be. live says whether any cancel is needed.
func withdrawLosers(j *Job, win int, now time.Time, why func(c Component) string) (cancels []cancelReq, live bool) {
	for k := range j.Comps {
		c := &j.Comps[k]
		if copyOf(*c, k) == win || c.State.Final() {
			continue
		}
		if c.Passive || c.RemoteID == "" {
			c.State, c.Reason, c.End = backends.StateCancelled, fmt.Sprintf("not submitted: copy %d succeeded", win), now
			continue
		}
		live = true
		cancels = append(cancels, cancelReq{j.ID, c.Site, c.RemoteID, why(*c)})
	}
	return cancels, live
}

// trackSet folds a copy set into its job under the set's rule. It returns
// the remote cancels to issue and whether it settled the job; when it did
// not, the job's remaining components — the winner of a first-to-start
// set, or a set whose every copy ended without starting — are tracked as
// one attempt. The ledger's lock held.
func (tk *tracker) trackSet(ctx context.Context, j *Job, now time.Time, rep *CycleReport) ([]cancelReq, bool) {
	rule, ok := setRule(j)
	switch {
	case !ok:
		return nil, false
	case rule == firstToSucceed:
		return tk.trackCopies(ctx, j, now, rep), true
	}
	cs := copyStates(j)
	win := winner(cs, rule)
	if win < 0 {
		if slices.ContainsFunc(j.Comps, func(c Component) bool { return !c.State.Final() }) {
			tk.persistLater(ctx, j)
			return nil, true
		}
		return nil, false // every replica ended without starting: the attempt failed
	}
	site := cs[win].site
	cancels, _ := withdrawLosers(j, win, now, func(Component) string { return "copy withdrawn: " + site + " started first" })
	w := j.Comps[win]
	w.Replica = false
	for k, c := range j.Comps {
		if k != win {
			tk.forget(c)
		}
	}
	j.Comps = []Component{w}
	tk.addEvent(j, now, "replica-won", w.Site, "the copy at "+w.Site+" started first; the others are withdrawn")
	return cancels, false
}
