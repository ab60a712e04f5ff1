package sshsite

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"time"
)

// Bounds of what a client can make the site do.
const (
	// maxOutput bounds what one batch command answers, on stdout and on
	// stderr each (under maxFrame, with room for the frame's envelope): a
	// command whose answer would be longer fails instead, saying so.
	maxOutput = maxFrame / 2
	// maxFieldWidth bounds one field's width in squeue -O (real SLURM
	// pads to the width asked; a width of 2^31 would make one line of
	// 2 GiB).
	maxFieldWidth = 4096
)

// limBuf is a bytes.Buffer that keeps at most maxOutput bytes: past that
// it drops what is written and remembers that it did.
type limBuf struct {
	b    bytes.Buffer
	over bool
}

func (l *limBuf) Write(p []byte) (int, error) {
	if l.over || l.b.Len()+len(p) > maxOutput {
		l.over = true
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *limBuf) WriteString(s string) (int, error) {
	if l.over || l.b.Len()+len(s) > maxOutput {
		l.over = true
		return len(s), nil
	}
	return l.b.WriteString(s)
}

func (l *limBuf) WriteByte(c byte) error {
	if l.over || l.b.Len()+1 > maxOutput {
		l.over = true
		return nil
	}
	return l.b.WriteByte(c)
}

func (l *limBuf) Reset()        { l.b.Reset(); l.over = false }
func (l *limBuf) Bytes() []byte { return l.b.Bytes() }
func (l *limBuf) Len() int      { return l.b.Len() }

// tooLong is the answer of a command whose output went over maxOutput.
func tooLong(name string) reply {
	return reply{Stderr: []byte(fmt.Sprintf("%s: error: the answer is longer than %d bytes; ask for fewer jobs or fields\n", name, maxOutput)), Code: 1}
}

// listenOwn listens on the unix socket path (mode 0600) for this
// process's site. A socket another live site answers on is left alone
// (ErrConfig: the Dir is in use); a stale one is replaced. The socket is
// made under a temporary name and linked into place, and Close of the
// listener never unlinks it: the site removes it at Close only if it is
// still the file it made (fi).
func listenOwn(path string) (net.Listener, os.FileInfo, error) {
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, 2*time.Second); err == nil {
			c.Close()
			return nil, nil, fmt.Errorf("%w: another simulated site serves %s; stop it or give another dir", ErrConfig, path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	os.Remove(tmp)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, nil, err
	}
	l.SetUnlinkOnClose(false)
	defer os.Remove(tmp)
	if err := os.Chmod(tmp, 0o600); err != nil {
		l.Close()
		return nil, nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		l.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, nil, fmt.Errorf("%w: another simulated site started in the same dir at the same moment (%s)", ErrConfig, path)
		}
		return nil, nil, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, fi, nil
}

// maxAuthorizedKeys bounds an authorized_keys file (ReadAuthorizedKeys).
const maxAuthorizedKeys = 1 << 20
