package sshbatch

import (
	"context"
	"fmt"
	"io"
	"path"

	"github.com/gridsub/gridsub/backends"
)

// Files that lie at a site (backends.DataHolder), shared by the SLURM and
// PBS backends: both keep job directories below the same Stager root, so a
// site file and a job directory are both paths below it.

// DataStager is what the site-file helpers need of a Stager: a read with
// a per-call size limit and a confined symbolic link (transport.Stager).
type DataStager interface {
	GetLimit(ctx context.Context, remote string, dst io.Writer, limit int64) (backends.Transfer, error)
	Link(ctx context.Context, target, link string) (int64, error)
}

// ReadData is backends.DataHolder.ReadData for a site named site whose
// files are below st's root. limit must be > 0.
func ReadData(ctx context.Context, site string, st backends.Stager, p string, dst io.Writer, limit int64) (backends.Transfer, error) {
	ds, ok := st.(DataStager)
	if !ok {
		return backends.Transfer{}, fmt.Errorf("%w: %s has no stager for files that lie there", backends.ErrUnsupported, site)
	}
	c, err := RelPath("site file", p)
	if err != nil {
		return backends.Transfer{}, err
	}
	if limit <= 0 {
		return backends.Transfer{}, fmt.Errorf("%w: reading %s at %s: a limit > 0 is required", backends.ErrInvalidSpec, c, site)
	}
	tr, err := ds.GetLimit(ctx, c, dst, limit)
	if err != nil {
		return tr, fmt.Errorf("%s: reading %s: %w", site, c, err)
	}
	return tr, nil
}

// LinkData is backends.DataHolder.LinkData for a backend whose job
// directory for spec is jobDir (relative to st's root).
func LinkData(ctx context.Context, site string, st backends.Stager, jobDir, p, remote string) (int64, error) {
	ds, ok := st.(DataStager)
	if !ok {
		return 0, fmt.Errorf("%w: %s has no stager for files that lie there", backends.ErrUnsupported, site)
	}
	c, err := RelPath("site file", p)
	if err != nil {
		return 0, err
	}
	r, err := RelPath("input", remote)
	if err != nil {
		return 0, err
	}
	n, err := ds.Link(ctx, c, path.Join(jobDir, r))
	if err != nil {
		return 0, fmt.Errorf("%s: linking %s into the job directory as %s: %w", site, c, r, err)
	}
	return n, nil
}
