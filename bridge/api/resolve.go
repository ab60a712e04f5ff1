package api

import (
	"context"
	"net/http"

	"github.com/gridsub/gridsub/bridge"
)

// resolve turns the {id} of a route (an id, or a unique prefix or suffix
// of one) into a job id with bridge.ResolveID: the served Broker's Job
// answers for exact ids, its MatchIDs (when it is a bridge.IDMatcher) for
// shortened ones. Every route that takes a job id goes through it.
func (s *Server) resolve(ctx context.Context, q string) (string, error) {
	m, _ := s.b.(bridge.IDMatcher)
	return bridge.ResolveID(ctx, q, func(id string) error {
		_, err := s.b.Job(id)
		return err
	}, m)
}

// job is the job a route's {id} names.
func (s *Server) job(r *http.Request) (*bridge.Job, error) {
	id, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.b.Job(id)
}

// MatchIDs implements bridge.IDMatcher when the store does (store.SQLite).
func (s storeBroker) MatchIDs(ctx context.Context, q string, limit int) ([]string, error) {
	if m, ok := s.st.(bridge.IDMatcher); ok {
		return m.MatchIDs(ctx, q, limit)
	}
	return nil, nil
}
