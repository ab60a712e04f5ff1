package jobrules

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Resolve returns the absolute path p, cleaned, with the symbolic links of
// its longest existing prefix resolved (filepath.EvalSymlinks); the part
// that does not exist yet is appended as given. A symbolic link whose
// target is missing is refused: creating the path later would follow it.
func Resolve(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", bad(ErrValue, "must be an absolute path, got %q", p)
	}
	p = filepath.Clean(p)
	cur, rest := p, ""
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", bad(ErrValue, "cannot resolve %s: %v", p, errors.Unwrap(err))
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			return "", bad(ErrOutsideRoot, "%s is a symbolic link to a missing target", cur)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// ResolveRoots resolves each root with Resolve (it need not exist yet).
func ResolveRoots(roots []string) ([]string, error) {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		rr, err := Resolve(r)
		if err != nil {
			return nil, fmt.Errorf("root %q: %w", r, err)
		}
		out = append(out, rr)
	}
	return out, nil
}

// Within reports whether the resolved path p is root or below it, and the
// part below ("" for root itself).
func Within(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	if rel == "." {
		rel = ""
	}
	return rel, true
}

// Confine resolves p (Resolve) and checks that it lies inside one of roots
// (resolved already, see ResolveRoots) and that no file or directory below
// that root is hidden (a name starting with "."): a root such as the home
// directory holds .ssh, .gnupg and .config, which no job may read or write.
// what names the roots in the message ("the output root"). It returns the
// resolved path.
func Confine(p string, roots []string, what string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", bad(ErrValue, "must not contain a NUL byte")
	}
	if len(p) > MaxPathLen {
		return "", bad(ErrValue, "is %d bytes; a path may be at most %d", len(p), MaxPathLen)
	}
	if len(roots) == 0 {
		return "", bad(ErrOutsideRoot, "%s is not allowed: %s: none configured", p, what)
	}
	r, err := Resolve(p)
	if err != nil {
		return "", err
	}
	for _, root := range roots {
		rel, ok := Within(root, r)
		if !ok {
			continue
		}
		for _, c := range strings.Split(rel, string(filepath.Separator)) {
			if strings.HasPrefix(c, ".") {
				return "", bad(ErrOutsideRoot, "%s names the hidden %q below %s; hidden files and directories are off limits", p, c, root)
			}
		}
		return r, nil
	}
	shown := p
	if r != p {
		shown = fmt.Sprintf("%s (%s with symbolic links resolved)", p, r)
	}
	return "", bad(ErrOutsideRoot, "%s is outside %s (%s)", shown, what, strings.Join(roots, ", "))
}
