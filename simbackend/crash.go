package simbackend

import (
	"github.com/gridsub/gridsub/backends"
)

// Crash simulates the failure of the whole site: every job it holds,
// queued or running, is lost (StateLost, reason "NodeFail: "+reason, as
// SLURM reports jobs of failed nodes), and until SetUp the site refuses
// service as after SetDown. A broker cannot tell this from an unreachable
// site until the site answers again; it sees the lost jobs then. Reservations
// are left as they are.
func (s *Site) Crash(reason string) {
	if reason == "" {
		reason = "site failure"
	}
	s.lock()
	defer s.unlock()
	why := "NodeFail: " + reason
	for _, j := range s.jobs {
		if j == nil {
			continue
		}
		switch j.state {
		case backends.StatePending:
			j.state, j.reason, j.end, j.exit = backends.StateLost, why, s.e.nowNS(), -1
			s.nQueue--
			s.note(j)
			s.sched.dequeue(&j.sjob, s.e.nowNS())
			s.forget(j)
		case backends.StateRunning:
			j.exit = -1
			s.finish(j, backends.StateLost, why)
		}
	}
	s.down = reason
}
