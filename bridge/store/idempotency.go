package store

import (
	"context"
	"fmt"
	"time"
)

// IdempotencyKeys returns the Request.IdempotencyKey of every job (not a
// group's element) written since since, mapped to the job's id (the
// oldest job when two share a key). A key is stored with its job, in the
// job's own write, so what this returns after a crash is exactly the jobs
// that exist: a daemon rebuilds its index of keys from it when it starts.
// Only jobs written since since are read (the jobs_updated index): about a
// day of submissions, not the whole history.
func (s *SQLite) IdempotencyKeys(ctx context.Context, since time.Time) (map[string]string, error) {
	rows, err := s.r.QueryContext(ctx, `
SELECT id, json_extract(CAST(body AS TEXT), '$.Req.IdempotencyKey')
FROM jobs
WHERE updated >= ? AND json_extract(CAST(body AS TEXT), '$.Req.IdempotencyKey') IS NOT NULL
  AND json_extract(CAST(body AS TEXT), '$.Parent') IS NULL
ORDER BY seq DESC`, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("store: idempotency keys: %w", s.wrap("reading", err))
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, key string
		if err := rows.Scan(&id, &key); err != nil {
			return nil, fmt.Errorf("store: idempotency keys: %w", s.wrap("reading", err))
		}
		if key != "" {
			out[key] = id // newest first: the oldest job of a key is written last
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: idempotency keys: %w", s.wrap("reading", err))
	}
	return out, nil
}
