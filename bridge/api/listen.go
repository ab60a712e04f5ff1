package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Sentinel errors of listening and connecting.
var (
	// ErrInUse: a live server already answers on the socket path.
	ErrInUse = errors.New("a gridsub daemon already answers on this socket")
	// ErrNotSocket: something other than a socket is at the socket path;
	// it is left alone.
	ErrNotSocket = errors.New("the socket path holds something that is not a socket")
	// ErrNoDaemon: no daemon answers on the socket (the client side).
	ErrNoDaemon = errors.New("no gridsub daemon is running")
)

// ListenUnix listens on a unix socket at path with file mode 0600, creating
// the directory (0700) if needed. If a socket file is already there and a
// server answers on it, ListenUnix fails with ErrInUse; if nobody answers,
// the stale socket is removed. Anything else at path (a regular file, a
// directory) gives ErrNotSocket and is not touched.
//
// The socket is created in a private directory and renamed into place, so
// it never exists at path with a wider mode. Closing the listener removes
// the socket file if it is still the one this listener made (same inode):
// a socket another server put there since is left alone.
func ListenUnix(path string) (net.Listener, error) {
	return listenUnix(path, 0o600)
}

// ListenUnixShared is ListenUnix with a socket of mode 0666: every local
// user can connect, and the server tells them apart by their peer
// credentials (SO_PEERCRED; Principal). The directory must let them
// reach the socket (a state directory of mode 0700 does not: put a shared
// socket in a directory of its own, such as /run/gridsub).
func ListenUnixShared(path string) (net.Listener, error) {
	return listenUnix(path, 0o666)
}

func listenUnix(path string, mode os.FileMode) (net.Listener, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("api: socket %s: %w", path, err)
	}
	path = abs
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("api: socket directory %s: %w", dir, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("api: %s: %w (a %s; move it or choose another socket path)", path, ErrNotSocket, fi.Mode().Type())
		}
		c, err := net.DialTimeout("unix", path, 2*time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("api: %s: %w (stop it first, or choose another socket path)", path, ErrInUse)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("api: %s: cannot tell whether a daemon answers: %w", path, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("api: removing the stale socket %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("api: socket %s: %w", path, err)
	}

	tmp, err := os.MkdirTemp(dir, ".gridsub-sock-")
	if err != nil {
		return nil, fmt.Errorf("api: socket %s: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("api: socket %s: %w", path, err)
	}
	tpath := filepath.Join(tmp, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tpath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("api: listening on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(tpath, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("api: socket %s: %w", path, err)
	}
	// Link, not rename: link fails if another server won a race for path.
	if err := os.Link(tpath, path); err != nil {
		l.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("api: %s: %w (another server started at the same moment)", path, ErrInUse)
		}
		return nil, fmt.Errorf("api: socket %s: %w", path, err)
	}
	fi, err := os.Lstat(tpath)
	if err != nil {
		l.Close()
		os.Remove(path)
		return nil, fmt.Errorf("api: socket %s: %w", path, err)
	}
	return &unixListener{UnixListener: l, path: path, made: fi}, nil
}

// unixListener removes its socket file on Close — only if the file at its
// path is still the socket it made: never another server's that replaced
// it.
type unixListener struct {
	*net.UnixListener
	path string
	made os.FileInfo
	once sync.Once
}

func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.made) {
			os.Remove(l.path)
		}
	})
	return err
}
