package store

import (
	"context"
	"database/sql"
)

// CreateAtVersion makes a database at path with the migrations up to v
// only, as an older gridsub would have left it.
func CreateAtVersion(ctx context.Context, path string, v int) error {
	db, err := sql.Open("sqlite", dsn(path, "_pragma=journal_mode(WAL)", "_txlock=immediate"))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return migrateTo(ctx, db, path, v)
}
