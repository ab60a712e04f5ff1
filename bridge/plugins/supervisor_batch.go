package plugins

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/backends"
)

var _ backends.BatchSubmitter = (*Supervisor)(nil)

// SubmitBatch implements backends.BatchSubmitter (declared when the plugin
// declared it). When the plugin dies during the call, every job's outcome
// is unknown: once the next process serves, each is looked up by its tag
// (when the plugin can find), a job found is adopted, and the others keep
// an error wrapping backends.ErrOutcomeUnknown, so the broker looks again
// before submitting them anew.
func (s *Supervisor) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	inst, err := s.current(ctx)
	if err == nil {
		err = s.unhealthy(ctx)
	}
	if err != nil {
		out := make([]backends.SubmitResult, len(specs))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	d := s.opts.CallTimeout + time.Duration(len(specs))*100*time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, d)
	res := inst.Client.SubmitBatch(cctx, specs)
	cancel()
	var first error
	for _, r := range res {
		if r.Err != nil {
			first = r.Err
			break
		}
	}
	if terr := s.timed(ctx, cctx, "SubmitBatch", d, first); s.overran(terr) {
		for i, r := range res {
			if r.Err != nil {
				// Any of them may have reached the site: looked up by tag
				// before it is submitted again.
				res[i].Err = fmt.Errorf("%w: %w: %w", backends.ErrOutcomeUnknown, terr, r.Err)
			}
		}
		return res
	}
	var died error
	for _, r := range res {
		if errors.Is(r.Err, ErrPluginExited) {
			died = r.Err
			break
		}
	}
	if died == nil {
		return res
	}
	s.lost(inst, died)
	next, werr := s.current(ctx)
	if werr != nil || !s.caps.Find {
		return res
	}
	for i, r := range res {
		if !backends.OutcomeUnknown(r.Err) {
			continue
		}
		sts, ferr := next.Client.FindByGridID(ctx, specs[i].GridID)
		switch {
		case ferr != nil:
			res[i].Err = fmt.Errorf("%w (and looking job %s up failed: %w)", r.Err, specs[i].GridID, ferr)
		case len(sts) > 0:
			s.log.Info("submission cut short by the plugin's death had reached the site; adopted", "grid_id", specs[i].GridID, "id", sts[0].ID)
			s.event("plugin-adopted", fmt.Sprintf("job %s found at the site as %s after the plugin died during its batch", specs[i].GridID, sts[0].ID))
			res[i] = backends.SubmitResult{ID: sts[0].ID}
		}
	}
	return res
}
