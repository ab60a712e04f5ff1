package regularfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Sentinel errors; the wrapping error names the path.
var (
	// ErrNotRegular: the path is a directory, a FIFO, a socket or a device.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is, or grew while being read, past the bound.
	ErrTooLarge = errors.New("file too large")
)

// Open opens path for reading without blocking and checks that it is a
// regular file of at most max bytes. The caller closes the file.
func Open(path string, max int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, fmt.Errorf("%s is %s, %w", path, Kind(fi.Mode()), ErrNotRegular)
	case fi.Size() > max:
		f.Close()
		return nil, fmt.Errorf("%s is %d bytes; at most %d are read: %w", path, fi.Size(), max, ErrTooLarge)
	}
	return f, nil
}

// Read reads the regular file path of at most max bytes (Open).
func Read(path string, max int64) ([]byte, error) {
	f, err := Open(path, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s grew past %d bytes while being read: %w", path, max, ErrTooLarge)
	}
	return data, nil
}

// Kind names a file type for an error message ("a named pipe (FIFO)").
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
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
	return "of type " + m.Type().String()
}
