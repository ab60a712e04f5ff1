package simbackend

import (
	"context"
	"fmt"

	"github.com/gridsub/gridsub/backends"
)

// Finish ends a running job now with exitCode (StateCompleted for 0,
// StateFailed otherwise), for a site whose jobs run as real processes
// (simbackend/sshsite): the process, not spec.Sim.Runtime, decides when the
// job ends; the walltime still kills it (StateTimeout) if it runs longer.
// Finishing a job that is not running is a no-op (it already ended, was
// cancelled or timed out); an id the site never issued wraps
// backends.ErrUnknownJob.
func (s *Site) Finish(ctx context.Context, id backends.JobID, exitCode int) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	s.lock()
	defer s.unlock()
	j := s.job(id)
	if j == nil {
		return fmt.Errorf("sim site %s: %w: %q", s.cfg.Name, backends.ErrUnknownJob, id)
	}
	if j.state != backends.StateRunning {
		return nil
	}
	j.exit = exitCode
	st, why := backends.StateCompleted, ""
	if exitCode != 0 {
		st, why = backends.StateFailed, "NonZeroExitCode"
	}
	s.finish(j, st, why)
	return nil
}
