package backends

import (
	"context"
	"io"
)

// SiteFile is an input that already lies at a site: a regular file below
// the site's remote root (the same root job directories are made in), that
// a job reads under the name Remote in its job directory. The job file
// writes it as an input with `site:` and `path:` (bridge/jobfile).
type SiteFile struct {
	Site   string // the site the file lies at
	Path   string // relative to that site's remote root; never absolute, never "../"
	Size   int64  // declared size in bytes (> 0): what the planner prices, and the most that is copied
	Remote string // path relative to the job directory; never absolute, never "../"
}

// DataHolder is an optional capability: the site can hand out a file that
// lies below its remote root, and can show it to a job running there
// without copying it.
//
// Contract: both confine path to the site's remote root exactly as the
// Stager confines staged files: every component is checked with Lstat, and
// a symbolic link, device, FIFO or socket on the way or as the file itself
// is refused (wrapping ErrInvalidSpec or the Stager's ErrSpecialFile); a
// missing file wraps fs.ErrNotExist. ReadData copies at most limit bytes
// (a larger file is refused before a byte moves) and reports the
// transfer with its SHA-256. LinkData makes remote in spec's job
// directory (created when missing) a symbolic link to the file, replacing
// an earlier link of the same name atomically, and returns the file's
// size; the link's text is relative, so it names nothing outside the root.
type DataHolder interface {
	ReadData(ctx context.Context, path string, dst io.Writer, limit int64) (Transfer, error)
	LinkData(ctx context.Context, spec *JobSpec, path, remote string) (int64, error)
}

// AsDataHolder returns b as a DataHolder when it has that capability.
func AsDataHolder(b Backend) (DataHolder, bool) {
	d, ok := b.(DataHolder)
	return d, ok && CapabilitiesOf(b).Data
}
