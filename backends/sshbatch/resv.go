package sshbatch

import (
	"context"
	"fmt"

	"github.com/gridsub/gridsub/backends"
)

// reserver is the dialect's Reserver, or ErrUnsupported.
func (b *Backend) reserver() (Reserver, error) {
	r, ok := b.d.(Reserver)
	if !ok {
		return nil, fmt.Errorf("%w: %s (%s) makes no reservations", backends.ErrUnsupported, b.cfg.Name, b.d.Traits().System)
	}
	return r, nil
}

// CreateReservation makes a native reservation for rs.Users (the login
// user when none is named). A reservation the batch system granted with
// fewer nodes than asked is deleted again and the request rejected.
func (b *Backend) CreateReservation(ctx context.Context, rs *backends.ReservationSpec) (backends.ResvID, error) {
	rv, err := b.reserver()
	if err != nil {
		return "", err
	}
	spec := *rs
	switch {
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
	got, err := rv.Reserve(ctx, b.x, &spec)
	if err != nil {
		if got != nil {
			return got.ID, err
		}
		return "", err
	}
	if got.Nodes < spec.Nodes {
		if derr := rv.Delete(ctx, b.x, got.ID); derr != nil {
			return "", fmt.Errorf("%w: %s granted only %d of %d nodes for reservation %s, and deleting it failed: %w",
				backends.ErrRejected, b.cfg.Name, got.Nodes, spec.Nodes, got.ID, derr)
		}
		return "", fmt.Errorf("%w: %s granted only %d of the %d requested nodes in that window (reservation %s withdrawn)",
			backends.ErrRejected, b.cfg.Name, got.Nodes, spec.Nodes, got.ID)
	}
	return got.ID, nil
}

// ShowReservation reads one reservation back; an unknown one is an error
// wrapping backends.ErrRejected.
func (b *Backend) ShowReservation(ctx context.Context, id backends.ResvID) (*backends.Reservation, error) {
	rv, err := b.reserver()
	if err != nil {
		return nil, err
	}
	return rv.Show(ctx, b.x, id)
}

// DeleteReservation deletes a reservation; one that does not exist is not
// an error.
func (b *Backend) DeleteReservation(ctx context.Context, id backends.ResvID) error {
	rv, err := b.reserver()
	if err != nil {
		return err
	}
	return rv.Delete(ctx, b.x, id)
}
