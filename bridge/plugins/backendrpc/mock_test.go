package backendrpc_test

import (
	"context"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// mock is a backend whose every method is a function field (nil: a zero
// answer), in the style of go-plugin's and Nomad's test mocks.
type mock struct {
	name    string
	info    func(context.Context) (*backends.SiteInfo, error)
	submit  func(context.Context, *backends.JobSpec) (backends.JobID, error)
	status  func(context.Context, []backends.JobID) ([]backends.JobStatus, error)
	cancel  func(context.Context, backends.JobID) error
	find    func(context.Context, string) ([]backends.JobStatus, error)
	fetch   func(context.Context, backends.JobID, *backends.JobSpec, string) ([]string, error)
	create  func(context.Context, *backends.ReservationSpec) (backends.ResvID, error)
	show    func(context.Context, backends.ResvID) (*backends.Reservation, error)
	del     func(context.Context, backends.ResvID) error
	watch   func(context.Context, func(backends.JobStatus)) error
	connErr func() error
	link    func() (float64, time.Duration, bool)
}

func (m *mock) Name() string { return m.name }

func (m *mock) Info(ctx context.Context) (*backends.SiteInfo, error) {
	if m.info == nil {
		return &backends.SiteInfo{Name: m.name}, nil
	}
	return m.info(ctx)
}

func (m *mock) Submit(ctx context.Context, s *backends.JobSpec) (backends.JobID, error) {
	if m.submit == nil {
		return "1", nil
	}
	return m.submit(ctx, s)
}

func (m *mock) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	if m.status == nil {
		out := make([]backends.JobStatus, len(ids))
		for i, id := range ids {
			out[i] = backends.JobStatus{ID: id, State: backends.StateLost}
		}
		return out, nil
	}
	return m.status(ctx, ids)
}

func (m *mock) Cancel(ctx context.Context, id backends.JobID) error {
	if m.cancel == nil {
		return nil
	}
	return m.cancel(ctx, id)
}

func (m *mock) FindByGridID(ctx context.Context, g string) ([]backends.JobStatus, error) {
	if m.find == nil {
		return nil, nil
	}
	return m.find(ctx, g)
}

func (m *mock) FetchOutputs(ctx context.Context, id backends.JobID, s *backends.JobSpec, dir string) ([]string, error) {
	if m.fetch == nil {
		return nil, nil
	}
	return m.fetch(ctx, id, s, dir)
}

func (m *mock) CreateReservation(ctx context.Context, r *backends.ReservationSpec) (backends.ResvID, error) {
	if m.create == nil {
		return "r1", nil
	}
	return m.create(ctx, r)
}

func (m *mock) ShowReservation(ctx context.Context, id backends.ResvID) (*backends.Reservation, error) {
	if m.show == nil {
		return &backends.Reservation{ID: id}, nil
	}
	return m.show(ctx, id)
}

func (m *mock) DeleteReservation(ctx context.Context, id backends.ResvID) error {
	if m.del == nil {
		return nil
	}
	return m.del(ctx, id)
}

func (m *mock) Watch(ctx context.Context, fn func(backends.JobStatus)) error {
	if m.watch == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	return m.watch(ctx, fn)
}

func (m *mock) ConnErr() error {
	if m.connErr == nil {
		return nil
	}
	return m.connErr()
}

func (m *mock) LinkEstimate() (float64, time.Duration, bool) {
	if m.link == nil {
		return 0, 0, false
	}
	return m.link()
}

// plainMock has none of the optional capabilities.
type plainMock struct{ name string }

func (p plainMock) Name() string                                   { return p.name }
func (plainMock) Info(context.Context) (*backends.SiteInfo, error) { return &backends.SiteInfo{}, nil }
func (plainMock) Submit(context.Context, *backends.JobSpec) (backends.JobID, error) {
	return "1", nil
}
func (plainMock) Status(_ context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	return make([]backends.JobStatus, len(ids)), nil
}
func (plainMock) Cancel(context.Context, backends.JobID) error { return nil }
