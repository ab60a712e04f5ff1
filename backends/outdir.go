package backends

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// OutputDir writes a job's fetched outputs below one local directory, for
// every Fetcher. It never follows a symbolic link out of that directory
// (os.Root: each component is opened relative to its parent, links that
// lead outside fail), and a file appears complete under its name or not at
// all: the bytes go to a new temp file created with O_EXCL beside it, which
// is renamed over the name when complete (a link planted at the name is
// replaced, not followed). The choice of the directory is the caller's.
type OutputDir struct {
	root *os.Root
	dir  string
}

// OpenOutputDir creates dir (and its parents) if needed and opens it.
// Close it when done.
func OpenOutputDir(dir string) (*OutputDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	return &OutputDir{root: r, dir: dir}, nil
}

// Close releases the directory.
func (d *OutputDir) Close() error { return d.root.Close() }

// Dir is the directory as given to OpenOutputDir.
func (d *OutputDir) Dir() string { return d.dir }

// Path is the local path of rel (slash-separated, relative to the
// directory).
func (d *OutputDir) Path(rel string) string { return filepath.Join(d.dir, filepath.FromSlash(rel)) }

// OutputFile is a file being written by OutputDir.Create. Write to it,
// then Commit (or Discard on failure).
type OutputFile struct {
	*os.File
	d        *OutputDir
	tmp, rel string
	done     bool
}

// checkOutputRel refuses a path that is empty, absolute or climbs out.
func checkOutputRel(rel string) (string, error) {
	c := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || filepath.IsAbs(rel) || c == "." || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("%w: output %q must be a relative path inside the output directory", ErrInvalidSpec, rel)
	}
	return c, nil
}

// Create starts writing rel: its parent directories are made inside the
// directory and a temp file ".<name>.gridsub-part-<random>" is created
// beside it with O_EXCL. A link anywhere on the way that leads outside the
// directory fails.
func (d *OutputDir) Create(rel string) (*OutputFile, error) {
	c, err := checkOutputRel(rel)
	if err != nil {
		return nil, err
	}
	dir, name := path.Split(c)
	if dir != "" {
		if err := d.root.MkdirAll(path.Clean(dir), 0o755); err != nil {
			return nil, fmt.Errorf("output %s in %s: %w", rel, d.dir, err)
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, "."+name[:min(len(name), 200)]+".gridsub-part-"+hex.EncodeToString(rnd[:]))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("output %s in %s: %w", rel, d.dir, err)
	}
	return &OutputFile{File: f, d: d, tmp: tmp, rel: c}, nil
}

// Commit closes the file and renames it into place; it returns the local
// path. A directory at the name is not replaced (an error).
func (f *OutputFile) Commit() (string, error) {
	if f.done {
		return "", fmt.Errorf("output %s: already committed or discarded", f.rel)
	}
	f.done = true
	if err := f.File.Close(); err != nil {
		f.d.root.Remove(f.tmp)
		return "", fmt.Errorf("output %s in %s: %w", f.rel, f.d.dir, err)
	}
	if fi, err := f.d.root.Lstat(f.rel); err == nil && fi.IsDir() {
		f.d.root.Remove(f.tmp)
		return "", fmt.Errorf("output %s in %s: a directory is in the way", f.rel, f.d.dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.d.root.Remove(f.tmp)
		return "", fmt.Errorf("output %s in %s: %w", f.rel, f.d.dir, err)
	}
	if err := f.d.root.Rename(f.tmp, f.rel); err != nil {
		f.d.root.Remove(f.tmp)
		return "", fmt.Errorf("output %s in %s: %w", f.rel, f.d.dir, err)
	}
	return f.d.Path(f.rel), nil
}

// Discard closes and removes the temp file. It is a no-op after Commit.
func (f *OutputFile) Discard() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	f.d.root.Remove(f.tmp)
}

// WriteFile writes data to rel as Create and Commit do.
func (d *OutputDir) WriteFile(rel string, data []byte) (string, error) {
	f, err := d.Create(rel)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Discard()
		return "", fmt.Errorf("output %s in %s: %w", rel, d.dir, err)
	}
	return f.Commit()
}
