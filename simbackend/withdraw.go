package simbackend

import (
	"context"
	"fmt"

	"github.com/gridsub/gridsub/backends"
)

var _ backends.Withdrawer = (*Site)(nil)

// Withdraw implements backends.Withdrawer: a pending job is cancelled, a
// started or ended one is left alone (ErrStarted). The check and the
// removal happen under the engine's lock, so no start can slip between.
func (s *Site) Withdraw(ctx context.Context, id backends.JobID) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	s.lock()
	defer s.unlock()
	j := s.job(id)
	switch {
	case j == nil:
		return nil // unknown to the site: nothing to withdraw (the Withdrawer contract)
	case j.startSeq > 0 || (j.state.Final() && j.state != backends.StateCancelled):
		return fmt.Errorf("sim site %s: %w: job %s is %s", s.cfg.Name, backends.ErrStarted, id, j.state)
	case j.state == backends.StatePending:
		s.cancel(j, "Withdrawn")
	}
	return nil
}
