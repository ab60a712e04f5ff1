package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxFileSize is the largest configuration file Load reads.
const MaxFileSize = 1 << 20

// readFile reads a configuration file of at most MaxFileSize bytes. It
// refuses anything but a regular file (a FIFO would block the reader, a
// device such as /dev/zero never ends), without blocking on a FIFO: the
// file is opened non-blocking and checked with fstat before any read.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file; give a YAML file", path, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s is %d bytes; a configuration file may be at most %d bytes", path, fi.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s grew past %d bytes while being read; a configuration file may be at most %d bytes", path, MaxFileSize, MaxFileSize)
	}
	return data, nil
}

// fileKind names a file type for an error message.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// Bounds of the files a configuration or a flag names (ReadRegular,
// checkNamedFile).
const (
	MaxKeyFile        = 1 << 20  // ssh.key_file, broker.tls_key: a private key is a few KiB
	MaxKnownHostsFile = 16 << 20 // ssh.known_hosts
	MaxCertFile       = 4 << 20  // broker.tls_cert (a chain)
	MaxTokenFile      = 64 << 10 // --token-file
)

// openRegular opens path without blocking (a FIFO would wait for a
// writer) and checks that it is a regular file of at most max bytes; the
// error names field.
func openRegular(field, path string, max int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	switch {
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, fmt.Errorf("%s: %s is %s; it must be a regular file", field, path, fileKind(fi.Mode()))
	case fi.Size() > max:
		f.Close()
		return nil, fmt.Errorf("%s: %s is %d bytes; at most %d are read", field, path, fi.Size(), max)
	}
	return f, nil
}

// ReadRegular reads the file that field (a configuration key or a flag)
// names: a regular file of at most max bytes, never a FIFO (it would hang
// the reader) or a device (/dev/zero never ends). The error names field.
func ReadRegular(field, path string, max int64) ([]byte, error) {
	f, err := openRegular(field, path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: %s grew past %d bytes while being read", field, path, max)
	}
	return data, nil
}

// checkNamedFile is the check of a file the configuration names and
// another part reads later (the SSH transport reads ssh.key_file): if it
// exists, it must be a regular file of at most max bytes, so that a FIFO
// or a device is refused when the configuration loads, with the key,
// instead of hanging or exhausting the daemon when it connects. A missing
// file is left to its reader, which says so.
func checkNamedFile(path string, max int64) string {
	f, err := openRegular("", path, max)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return ""
	}
	if err != nil {
		return err.Error()[2:] // without the empty field's ": "
	}
	f.Close()
	return ""
}
