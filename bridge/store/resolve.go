package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/bridge"
)

var _ bridge.IDMatcher = (*SQLite)(nil)

// likeEscaper makes s literal inside a LIKE pattern (ESCAPE '\').
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// MatchIDs implements bridge.IDMatcher: the ids that start or end with s,
// in submission order, at most limit (0: all). It reads the id column only.
func (s *SQLite) MatchIDs(ctx context.Context, q string, limit int) ([]string, error) {
	e := likeEscaper.Replace(q)
	query := `SELECT id FROM jobs WHERE id LIKE ? ESCAPE '\' OR id LIKE ? ESCAPE '\' ORDER BY seq`
	args := []any{e + "%", "%" + e}
	if limit > 0 {
		query, args = query+" LIMIT ?", append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: matching job ids: %w", s.wrap("reading", err))
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: matching job ids: %w", s.wrap("reading", err))
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: matching job ids: %w", s.wrap("reading", err))
	}
	return ids, nil
}
