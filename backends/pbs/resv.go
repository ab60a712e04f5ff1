package pbs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// MinResvLead is how far ahead of now a reservation starts at the
// earliest: pbs_rsub refuses a start in the past, and the request must
// reach the server first.
const MinResvLead = 10 * time.Second

// Reserve asks pbs_rsub for r.Nodes whole nodes (exclusive) and
// waits for the scheduler's decision: pbs_rsub -I waits up to ResvWait and
// prints CONFIRMED or DENIED; a reservation still UNCONFIRMED is polled
// with pbs_rstat until confirmed, and deleted and rejected when ResvWait
// runs out. A DENIED reservation is rejected (PBS has already removed it;
// its reason is only in the scheduler's log); the Backend withdraws a
// confirmed one with fewer nodes than asked.
func (d *dialect) Reserve(ctx context.Context, x *sshbatch.Exec, spec *backends.ReservationSpec) (*backends.Reservation, error) {
	if strings.TrimSpace(spec.Name) == "" {
		return nil, fmt.Errorf("%w: reservation has no name", backends.ErrInvalidSpec)
	}
	for _, u := range spec.Users {
		if !sshbatch.ValidGridID(u) {
			return nil, fmt.Errorf("%w: reservation user %q is not a user name", backends.ErrInvalidSpec, u)
		}
	}
	nodes, cpn, err := d.shape(ctx, x)
	if err != nil {
		return nil, err
	}
	if spec.Nodes > nodes {
		return nil, fmt.Errorf("%w: reservation for %d nodes, %s has %d usable", backends.ErrRejected, spec.Nodes, d.cfg.Name, nodes)
	}
	start := spec.Start
	if earliest := d.cfg.Now().Add(MinResvLead); start.Before(earliest) {
		start = earliest
	}
	// pbs_rsub takes whole seconds: round up so the window never opens early.
	if t := start.Truncate(time.Second); t.Before(start) {
		start = t.Add(time.Second)
	}
	r, err := x.Output(ctx, d.cmds.RsubArgv(spec, start, d.cfg.Location, cpn, d.cfg.ResvWait))
	if err != nil {
		return nil, err
	}
	id, state, err := ParseRsub(r.Stdout)
	if err != nil {
		return nil, err
	}
	if state == "DENIED" {
		return nil, fmt.Errorf("%w: %s denied reservation %s (%d nodes from %s for %s); %s",
			backends.ErrRejected, d.cfg.Name, id, spec.Nodes, start.Format(time.RFC3339), spec.Duration, d.deniedWhy(ctx, x, id))
	}
	return d.waitConfirmed(ctx, x, id, state)
}

// waitConfirmed polls pbs_rstat until the reservation is confirmed (or
// running), is gone (denied), or ResvWait is over (deleted, rejected).
func (d *dialect) waitConfirmed(ctx context.Context, x *sshbatch.Exec, id backends.ResvID, state string) (*backends.Reservation, error) {
	deadline := d.cfg.Now().Add(d.cfg.ResvWait)
	for {
		got, err := d.Show(ctx, x, id)
		if err != nil {
			return nil, fmt.Errorf("%w: reservation %s (pbs_rsub said %s) was not confirmed: %w", backends.ErrRejected, id, state, err)
		}
		if got.State != "RESV_UNCONFIRMED" {
			if got.State != "RESV_CONFIRMED" && got.State != "RESV_RUNNING" {
				_ = d.Delete(ctx, x, id)
				return nil, fmt.Errorf("%w: reservation %s is %s, not confirmed (withdrawn)", backends.ErrRejected, id, got.State)
			}
			return got, nil
		}
		if !d.cfg.Now().Before(deadline) {
			if derr := d.Delete(ctx, x, id); derr != nil {
				return nil, fmt.Errorf("%w: reservation %s still unconfirmed after %s, and deleting it failed: %w", backends.ErrRejected, id, d.cfg.ResvWait, derr)
			}
			return nil, fmt.Errorf("%w: reservation %s still unconfirmed after %s (withdrawn): is the site's scheduler running? %s", backends.ErrRejected, id, d.cfg.ResvWait, d.deniedWhy(ctx, x, id))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: waiting for reservation %s: %w", d.cfg.Name, id, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// Show reads one reservation back (pbs_rstat -f). pbs_rstat
// exits 0 for an unknown id: that is detected by its message and is an
// error wrapping ErrRejected.
func (d *dialect) Show(ctx context.Context, x *sshbatch.Exec, id backends.ResvID) (*backends.Reservation, error) {
	if !validResvID(string(id)) {
		return nil, fmt.Errorf("%w: reservation id %q (R<n>[.<server>])", backends.ErrInvalidSpec, id)
	}
	argv := d.cmds.RstatArgv(id)
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if unknownResv(string(r.Stderr)) {
		return nil, fmt.Errorf("%w: reservation %s not found on %s", backends.ErrRejected, id, d.cfg.Name)
	}
	if r.ExitCode != 0 {
		return nil, x.Fail(argv, r)
	}
	rs, err := ParseRstat(r.Stdout)
	if err != nil {
		return nil, err
	}
	for i := range rs {
		if ResvQueue(string(rs[i].ID)) == ResvQueue(string(id)) {
			res := rs[i].Reservation(d.cfg.Location)
			return &res, nil
		}
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: reservation %s not found on %s (pbs_rstat printed nothing)", backends.ErrRejected, id, d.cfg.Name)
	}
	return nil, badOutput("pbs_rstat -f", r.Stdout, "reservation "+string(id)+" not in the output")
}

// Delete deletes a reservation (pbs_rdel); one that does not
// exist is not an error. PBS kills the jobs still running in it.
func (d *dialect) Delete(ctx context.Context, x *sshbatch.Exec, id backends.ResvID) error {
	if !validResvID(string(id)) {
		return fmt.Errorf("%w: reservation id %q (R<n>[.<server>])", backends.ErrInvalidSpec, id)
	}
	argv := d.cmds.RdelArgv(id)
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		if r.ExitCode == 236 || unknownResv(Message(r)) {
			return nil
		}
		return x.Fail(argv, r)
	}
	return nil
}

// unknownResv reports pbs_rstat's and pbs_rdel's words for a reservation
// the server does not have (never made, denied, deleted, or ended).
func unknownResv(msg string) bool { return strings.Contains(msg, "Unknown Reservation Id") }
