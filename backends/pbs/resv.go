package pbs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// MinResvLead is how far ahead of now a reservation starts at the
// earliest: pbs_rsub refuses a start in the past, and the request must
// reach the server first.
const MinResvLead = 10 * time.Second

// CreateReservation asks pbs_rsub for r.Nodes whole nodes (exclusive) and
// waits for the scheduler's decision: pbs_rsub -I waits up to ResvWait and
// prints CONFIRMED or DENIED; a reservation still UNCONFIRMED is polled
// with pbs_rstat until confirmed, and deleted and rejected when ResvWait
// runs out. A DENIED reservation is rejected (PBS has already removed it;
// its reason is only in the scheduler's log), and a confirmed one with
// fewer nodes than asked is deleted and rejected.
func (b *Backend) CreateReservation(ctx context.Context, rs *backends.ReservationSpec) (backends.ResvID, error) {
	spec := *rs
	switch {
	case strings.TrimSpace(spec.Name) == "":
		return "", fmt.Errorf("%w: reservation has no name", backends.ErrInvalidSpec)
	case spec.Nodes < 1:
		return "", fmt.Errorf("%w: reservation needs >= 1 node, got %d", backends.ErrInvalidSpec, spec.Nodes)
	case spec.Duration <= 0:
		return "", fmt.Errorf("%w: reservation duration must be > 0, got %s", backends.ErrInvalidSpec, spec.Duration)
	}
	if len(spec.Users) == 0 {
		if b.cfg.User == "" {
			return "", fmt.Errorf("%w: reservation names no users and the backend has no login user configured", backends.ErrInvalidSpec)
		}
		spec.Users = []string{b.cfg.User}
	}
	for _, u := range spec.Users {
		if !gridIDRe.MatchString(u) {
			return "", fmt.Errorf("%w: reservation user %q is not a user name", backends.ErrInvalidSpec, u)
		}
	}
	nodes, cpn, err := b.shape(ctx)
	if err != nil {
		return "", err
	}
	if spec.Nodes > nodes {
		return "", fmt.Errorf("%w: reservation for %d nodes, %s has %d usable", backends.ErrRejected, spec.Nodes, b.cfg.Name, nodes)
	}
	start := spec.Start
	if earliest := b.cfg.Now().Add(MinResvLead); start.Before(earliest) {
		start = earliest
	}
	// pbs_rsub takes whole seconds: round up so the window never opens early.
	if t := start.Truncate(time.Second); t.Before(start) {
		start = t.Add(time.Second)
	}
	argv := b.cmds.RsubArgv(&spec, start, b.cfg.Location, cpn, b.cfg.ResvWait)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return "", err
	}
	if r.ExitCode != 0 {
		return "", b.commandErr(argv, r)
	}
	id, state, err := ParseRsub(r.Stdout)
	if err != nil {
		return "", err
	}
	if state == "DENIED" {
		return "", fmt.Errorf("%w: %s denied reservation %s (%d nodes from %s for %s); PBS gives the reason only in its scheduler log",
			backends.ErrRejected, b.cfg.Name, id, spec.Nodes, start.Format(time.RFC3339), spec.Duration)
	}
	got, err := b.waitConfirmed(ctx, id, state)
	if err != nil {
		return "", err
	}
	if got.Nodes < spec.Nodes {
		if derr := b.DeleteReservation(ctx, id); derr != nil {
			return "", fmt.Errorf("%w: %s granted only %d of %d nodes for reservation %s, and deleting it failed: %w",
				backends.ErrRejected, b.cfg.Name, got.Nodes, spec.Nodes, id, derr)
		}
		return "", fmt.Errorf("%w: %s granted only %d of the %d requested nodes (reservation %s withdrawn)",
			backends.ErrRejected, b.cfg.Name, got.Nodes, spec.Nodes, id)
	}
	return id, nil
}

// waitConfirmed polls pbs_rstat until the reservation is confirmed (or
// running), is gone (denied), or ResvWait is over (deleted, rejected).
func (b *Backend) waitConfirmed(ctx context.Context, id backends.ResvID, state string) (*backends.Reservation, error) {
	deadline := b.cfg.Now().Add(b.cfg.ResvWait)
	for {
		got, err := b.ShowReservation(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("%w: reservation %s (pbs_rsub said %s) was not confirmed: %w", backends.ErrRejected, id, state, err)
		}
		if got.State != "RESV_UNCONFIRMED" {
			if got.State != "RESV_CONFIRMED" && got.State != "RESV_RUNNING" {
				_ = b.DeleteReservation(ctx, id)
				return nil, fmt.Errorf("%w: reservation %s is %s, not confirmed (withdrawn)", backends.ErrRejected, id, got.State)
			}
			return got, nil
		}
		if !b.cfg.Now().Before(deadline) {
			if derr := b.DeleteReservation(ctx, id); derr != nil {
				return nil, fmt.Errorf("%w: reservation %s still unconfirmed after %s, and deleting it failed: %w", backends.ErrRejected, id, b.cfg.ResvWait, derr)
			}
			return nil, fmt.Errorf("%w: reservation %s still unconfirmed after %s (withdrawn): is the site's scheduler running?", backends.ErrRejected, id, b.cfg.ResvWait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: waiting for reservation %s: %w", b.cfg.Name, id, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// ShowReservation reads one reservation back (pbs_rstat -f). pbs_rstat
// exits 0 for an unknown id: that is detected by its message and is an
// error wrapping ErrRejected.
func (b *Backend) ShowReservation(ctx context.Context, id backends.ResvID) (*backends.Reservation, error) {
	if !validResvID(string(id)) {
		return nil, fmt.Errorf("%w: reservation id %q (R<n>[.<server>])", backends.ErrInvalidSpec, id)
	}
	argv := b.cmds.RstatArgv(id)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if strings.Contains(string(r.Stderr), "Unknown Reservation Id") {
		return nil, fmt.Errorf("%w: reservation %s not found on %s", backends.ErrRejected, id, b.cfg.Name)
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	rs, err := ParseRstat(r.Stdout)
	if err != nil {
		return nil, err
	}
	for i := range rs {
		if ResvQueue(string(rs[i].ID)) == ResvQueue(string(id)) {
			res := rs[i].Reservation(b.cfg.Location)
			return &res, nil
		}
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: reservation %s not found on %s (pbs_rstat printed nothing)", backends.ErrRejected, id, b.cfg.Name)
	}
	return nil, badOutput("pbs_rstat -f", r.Stdout, "reservation "+string(id)+" not in the output")
}

// DeleteReservation deletes a reservation (pbs_rdel); one that does not
// exist is not an error. PBS kills the jobs still running in it.
func (b *Backend) DeleteReservation(ctx context.Context, id backends.ResvID) error {
	if !validResvID(string(id)) {
		return fmt.Errorf("%w: reservation id %q (R<n>[.<server>])", backends.ErrInvalidSpec, id)
	}
	argv := b.cmds.RdelArgv(id)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		if r.ExitCode == 236 || strings.Contains(Message(r), "Unknown Reservation Id") {
			return nil
		}
		return b.commandErr(argv, r)
	}
	return nil
}
