package simbackend

import (
	"slices"
	"strconv"

	"github.com/gridsub/gridsub/backends"
)

// Fail simulates the failure of the whole site (its nodes and its front
// end) now: every job queued at the site ends StateFailed ("SiteFailed"),
// every running job ends StateFailed ("NodeFail"), exit code -1, in job id
// order, each reported to OnChange; and, as after SetDown, every Backend,
// Finder, Fetcher and Reserver method fails with backends.ErrUnavailable
// carrying reason until Repair. Reservations stay booked (their jobs
// failed). It returns the ids of the jobs it failed. Failing a failed site
// fails nothing more.
func (s *Site) Fail(reason string) []backends.JobID {
	if reason == "" {
		reason = "site failed"
	}
	s.lock()
	defer s.unlock()
	s.down = reason
	var victims []*siteJob
	for _, sj := range s.sched.queue {
		if sj.queued {
			victims = append(victims, sj.owner.(*siteJob))
		}
	}
	for _, sj := range s.sched.running {
		victims = append(victims, sj.owner.(*siteJob))
	}
	for _, rv := range s.resvs {
		for _, j := range rv.jobs {
			if j.state == backends.StatePending || j.state == backends.StateRunning {
				victims = append(victims, j)
			}
		}
	}
	slices.SortFunc(victims, func(a, b *siteJob) int { return idNum(a.id) - idNum(b.id) })
	victims = slices.Compact(victims)
	// Queued jobs first, so that the passes run by the running jobs' ends
	// find nothing left to start on the dead nodes.
	now := s.e.nowNS()
	ids := make([]backends.JobID, 0, len(victims))
	for _, j := range victims {
		if j.state != backends.StatePending {
			continue
		}
		j.state, j.reason, j.end, j.exit = backends.StateFailed, "SiteFailed", now, -1
		s.nQueue--
		j.sjob.queued = false
		if j.sjob.resv != nil {
			j.sjob.resv.queue = compact(j.sjob.resv.queue)
		}
		s.note(j)
		s.forget(j)
		ids = append(ids, j.id)
	}
	s.sched.queue = compact(s.sched.queue)
	for _, j := range victims {
		if j.state != backends.StateRunning {
			continue
		}
		j.exit = -1
		s.finish(j, backends.StateFailed, "NodeFail") // forgets it (ForgetEnded)
		ids = append(ids, j.id)
	}
	slices.SortFunc(ids, func(a, b backends.JobID) int { return idNum(a) - idNum(b) })
	return ids
}

// Repair ends a failure begun by Fail (or an outage begun by SetDown): the
// site takes work again, with all its nodes free of failed jobs.
func (s *Site) Repair() { s.SetUp() }

// Failed reports whether the site is down (Fail or SetDown) and why.
func (s *Site) Failed() (bool, string) {
	s.lock()
	defer s.unlock()
	return s.down != "", s.down
}

func idNum(id backends.JobID) int {
	n, _ := strconv.Atoi(string(id))
	return n
}
