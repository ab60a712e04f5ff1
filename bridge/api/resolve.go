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
//
// A job the request's principal may not see (another user's) is not
// found, exactly as an unknown id: neither an exact id nor a shortened
// one resolves to it.
func (s *Server) resolve(ctx context.Context, q string) (string, error) {
	p, ok := PrincipalOf(ctx)
	if !ok {
		// Handlers run behind auth; an unmarked context sees nothing.
		return "", notYours(q)
	}
	var m bridge.IDMatcher
	if bm, ok := s.b.(bridge.IDMatcher); ok {
		m = bm
		if !p.Admin {
			m = ownMatcher{s: s, p: p, m: bm}
		}
	}
	return bridge.ResolveID(ctx, q, func(id string) error {
		j, err := s.b.Job(id)
		if err != nil {
			return err
		}
		if !s.sees(p, j) {
			return notYours(id)
		}
		return nil
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
