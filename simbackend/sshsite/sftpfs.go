package sshsite

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/pkg/sftp"
)

// rootFS serves SFTP requests inside one directory through an os.Root:
// request paths are the real absolute paths below the site's home (so that
// SFTP and the login shell name the same files), relative ones start at the
// home, and every access goes through the root, which refuses any path,
// symbolic links included, that would leave it. Writes are bounded per
// file (maxFile).
type rootFS struct {
	home    string // absolute, clean
	root    *os.Root
	maxFile int64
}

// errOutside is what a path outside the site's home gets.
var errOutside = errors.New("path outside the site's directory")

// rel maps a request path to a path relative to the root.
func (r *rootFS) rel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: NUL in path", fs.ErrInvalid)
	}
	if !path.IsAbs(p) {
		p = path.Join(r.home, p)
	}
	p = path.Clean(p)
	if p == r.home {
		return ".", nil
	}
	rest, ok := strings.CutPrefix(p, r.home+"/")
	if !ok {
		return "", fmt.Errorf("%s: %w: %w", p, errOutside, fs.ErrPermission)
	}
	return rest, nil
}

func (r *rootFS) handlers() sftp.Handlers {
	return sftp.Handlers{FileGet: r, FilePut: r, FileCmd: r, FileList: r}
}

// Fileread implements sftp.FileReader.
func (r *rootFS) Fileread(req *sftp.Request) (io.ReaderAt, error) {
	p, err := r.rel(req.Filepath)
	if err != nil {
		return nil, err
	}
	f, err := r.root.Open(p)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file: %w", req.Filepath, fs.ErrPermission)
	}
	return f, nil
}

// boundedFile refuses writes beyond max bytes.
type boundedFile struct {
	*os.File
	max int64
}

func (b boundedFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > b.max {
		return 0, fmt.Errorf("file larger than the site's limit of %d bytes: %w", b.max, fs.ErrPermission)
	}
	return b.File.WriteAt(p, off)
}

// Filewrite implements sftp.FileWriter.
func (r *rootFS) Filewrite(req *sftp.Request) (io.WriterAt, error) {
	f, err := r.open(req)
	if err != nil {
		return nil, err
	}
	return boundedFile{f, r.maxFile}, nil
}

// OpenFile implements sftp.OpenFileWriter.
func (r *rootFS) OpenFile(req *sftp.Request) (sftp.WriterAtReaderAt, error) {
	f, err := r.open(req)
	if err != nil {
		return nil, err
	}
	return boundedFile{f, r.maxFile}, nil
}

func (r *rootFS) open(req *sftp.Request) (*os.File, error) {
	p, err := r.rel(req.Filepath)
	if err != nil {
		return nil, err
	}
	pf := req.Pflags()
	flag := 0
	switch {
	case pf.Read && pf.Write:
		flag = os.O_RDWR
	case pf.Write:
		flag = os.O_WRONLY
	}
	if pf.Append {
		flag |= os.O_APPEND
	}
	if pf.Creat {
		flag |= os.O_CREATE
	}
	if pf.Trunc {
		flag |= os.O_TRUNC
	}
	if pf.Excl {
		flag |= os.O_EXCL
	}
	mode := fs.FileMode(0o644)
	if a := req.Attributes(); req.AttrFlags().Permissions && a != nil {
		mode = a.FileMode().Perm()
	}
	return r.root.OpenFile(p, flag, mode)
}

// Filecmd implements sftp.FileCmder.
func (r *rootFS) Filecmd(req *sftp.Request) error {
	p, err := r.rel(req.Filepath)
	if err != nil {
		return err
	}
	switch req.Method {
	case "Setstat":
		if req.AttrFlags().Permissions {
			return r.root.Chmod(p, req.Attributes().FileMode().Perm())
		}
		if req.AttrFlags().Size {
			f, err := r.root.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			if sz := int64(req.Attributes().Size); sz > r.maxFile {
				return fmt.Errorf("size %d beyond the site's limit: %w", sz, fs.ErrPermission)
			}
			return f.Truncate(int64(req.Attributes().Size))
		}
		return nil
	case "Rename", "PosixRename":
		t, err := r.rel(req.Target)
		if err != nil {
			return err
		}
		if req.Method == "Rename" {
			if _, err := r.root.Lstat(t); err == nil {
				return fmt.Errorf("%s exists: %w", req.Target, fs.ErrExist)
			}
		}
		return r.root.Rename(p, t)
	case "Rmdir", "Remove":
		return r.root.Remove(p)
	case "Mkdir":
		return r.root.Mkdir(p, 0o755)
	case "Symlink", "Link":
		return fmt.Errorf("%s is not supported by a simulated site: %w", req.Method, fs.ErrPermission)
	}
	return sftp.ErrSSHFxOpUnsupported
}

// PosixRename implements sftp.PosixRenameFileCmder.
func (r *rootFS) PosixRename(req *sftp.Request) error {
	req.Method = "PosixRename"
	return r.Filecmd(req)
}

type listerAt []os.FileInfo

func (l listerAt) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if n < len(out) {
		return n, io.EOF
	}
	return n, nil
}

// maxList bounds a directory listing.
const maxList = 100000

// Filelist implements sftp.FileLister.
func (r *rootFS) Filelist(req *sftp.Request) (sftp.ListerAt, error) {
	p, err := r.rel(req.Filepath)
	if err != nil {
		return nil, err
	}
	switch req.Method {
	case "Stat":
		st, err := r.root.Stat(p)
		if err != nil {
			return nil, err
		}
		return listerAt{st}, nil
	case "List":
		d, err := r.root.Open(p)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		ents, err := d.Readdir(maxList)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return listerAt(ents), nil
	case "Readlink":
		t, err := r.root.Readlink(p)
		if err != nil {
			return nil, err
		}
		return listerAt{fileName(t)}, nil
	}
	return nil, sftp.ErrSSHFxOpUnsupported
}

// Lstat implements sftp.LstatFileLister.
func (r *rootFS) Lstat(req *sftp.Request) (sftp.ListerAt, error) {
	p, err := r.rel(req.Filepath)
	if err != nil {
		return nil, err
	}
	st, err := r.root.Lstat(p)
	if err != nil {
		return nil, err
	}
	return listerAt{st}, nil
}

// RealPath implements sftp.RealPathFileLister: paths are cleaned
// lexically against the home; links are not resolved (a client must not
// learn where a link points outside the home).
func (r *rootFS) RealPath(p string) (string, error) {
	if !path.IsAbs(p) {
		p = path.Join(r.home, p)
	}
	return path.Clean(p), nil
}

// fileName is a FileInfo carrying only a name (Readlink's answer).
type fileName string

func (f fileName) Name() string       { return string(f) }
func (f fileName) Size() int64        { return 0 }
func (f fileName) Mode() fs.FileMode  { return fs.ModeSymlink }
func (f fileName) ModTime() time.Time { return time.Time{} }
func (f fileName) IsDir() bool        { return false }
func (f fileName) Sys() any           { return nil }
