package jobrules

import (
	"path"
	"strings"
)

// SiteFilePath checks the path of a file that lies at a site (a job file
// input with site: and path:): relative to the site's remote root (its
// remote_dir, the user's gridsub area there), not absolute, not escaping
// with "..", no NUL, at most MaxPathLen bytes, no trailing "/" (a file, not
// a directory), and no hidden component (".ssh/id_ed25519" is refused even
// when the remote root is the home directory). It returns the cleaned path.
// The site itself confines it again, symbolic links included, when the
// file is read or linked (backends.DataHolder).
func SiteFilePath(s string) (string, error) {
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") {
		return "", bad(ErrPath, "must be relative to the site's remote_dir (the user's area there), got the absolute path %q", s)
	}
	if c := path.Clean(s); c == ".." || strings.HasPrefix(c, "../") {
		return "", bad(ErrPath, "%q escapes the site's remote_dir; use a path inside it (no leading ../)", s)
	}
	c, err := RelPath(s, false)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(c, "/") {
		return "", bad(ErrValue, "must name a file, got the directory %q", s)
	}
	for _, part := range strings.Split(c, "/") {
		if strings.HasPrefix(part, ".") {
			return "", bad(ErrPath, "%q names the hidden %q; hidden files and directories at a site are off limits", s, part)
		}
	}
	return c, nil
}

// SiteFileSize checks the declared size of a file that lies at a site:
// 1 byte .. MaxDataSize (64 TiB). The size is what the planner prices and
// the most that is ever copied: a larger file is refused, not cut.
func SiteFileSize(n int64) error {
	if n <= 0 || n > MaxDataSize {
		return bad(ErrValue, "must be 1 .. %d bytes (64 TiB): the file's size, which the planner prices and which bounds the copy, got %d", int64(MaxDataSize), n)
	}
	return nil
}
