package config

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/gridsub/gridsub/backends/regularfile"
	"github.com/gridsub/gridsub/backends/transport"
)

// MaxFileSize is the largest configuration file Load reads.
const MaxFileSize = 1 << 20

// readFile reads a configuration file of at most MaxFileSize bytes: a
// regular file only, opened without blocking (regularfile.Read).
func readFile(path string) ([]byte, error) {
	data, err := regularfile.Read(path, MaxFileSize)
	switch {
	case errors.Is(err, regularfile.ErrNotRegular):
		return nil, fmt.Errorf("%w; give a YAML file", err)
	case errors.Is(err, regularfile.ErrTooLarge):
		return nil, fmt.Errorf("%w; a configuration file may be at most %d bytes", err, MaxFileSize)
	}
	return data, err
}

// Bounds of the files a configuration or a flag names (ReadRegular,
// checkNamedFile).
const (
	MaxKeyFile        = transport.MaxKeyFile        // ssh.key_file, broker.tls_key: a private key is a few KiB
	MaxKnownHostsFile = transport.MaxKnownHostsFile // ssh.known_hosts
	MaxCertFile       = 4 << 20                     // broker.tls_cert (a chain)
	MaxTokenFile      = 64 << 10                    // --token-file
)

// ReadRegular reads the file that field (a configuration key or a flag)
// names: a regular file of at most max bytes, never a FIFO (it would hang
// the reader) or a device (/dev/zero never ends). The error names field.
func ReadRegular(field, path string, max int64) ([]byte, error) {
	data, err := regularfile.Read(path, max)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
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
	f, err := regularfile.Open(path, max)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	f.Close()
	return ""
}
