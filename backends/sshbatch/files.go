package sshbatch

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/backends"
)

// The commands on job directories every dialect shares, and their pure
// parsers. Each builder returns an argv the Runner delivers word by word.

// ExitFilesArgv reads several exit-code files in one command; missing files
// are skipped.
func ExitFilesArgv(paths []string) []string {
	return append([]string{"grep", "-H", "-s", ""}, paths...)
}

// ParseExitFiles reads `grep -H -s ” <dir>/.gridsub-exit ...`: "path:code"
// lines. It returns the code per path; unreadable lines and codes outside
// 0..255 are skipped (a file being written is absent, never partial: the
// wrapper renames it into place).
func ParseExitFiles(out []byte) map[string]int {
	m := map[string]int{}
	for _, l := range Lines(out) {
		i := strings.LastIndexByte(l, ':')
		if i < 0 {
			continue
		}
		if c, err := strconv.Atoi(strings.TrimSpace(l[i+1:])); err == nil && c >= 0 && c <= 255 {
			m[l[:i]] = c
		}
	}
	return m
}

// MkdirArgv makes the job directories of a batch in one command.
func MkdirArgv(dirs []string) []string {
	return append([]string{"mkdir", "-p", "--"}, dirs...)
}

// ListFilesArgv lists everything below dir, relative to it, each entry
// its type letter (find's %y: f regular file, d directory, l symbolic
// link, p FIFO, s socket, b/c device) then its path, NUL terminated. -P:
// symbolic links are listed, never followed.
func ListFilesArgv(dir string) []string {
	return []string{"find", "-P", dir, "-mindepth", "1", "-printf", "%y%P\\0"}
}

// FileEntry is one entry of a directory listing (ListFilesArgv).
type FileEntry struct {
	Type byte   // find's %y: 'f' regular file, 'd' directory, 'l' link, 'p' FIFO, 's' socket, 'b'/'c' device
	Path string // relative to the listed directory
}

// TypeName names the entry's type for messages.
func (e FileEntry) TypeName() string {
	switch e.Type {
	case 'f':
		return "regular file"
	case 'd':
		return "directory"
	case 'l':
		return "symbolic link"
	case 'p':
		return "named pipe (FIFO)"
	case 's':
		return "socket"
	case 'b':
		return "block device"
	case 'c':
		return "character device"
	}
	return fmt.Sprintf("file of unknown type %q", e.Type)
}

// MaxListEntries bounds a directory listing: an output directory with more
// entries is refused rather than fetched file by file.
const MaxListEntries = 100000

// ParseFileList reads the NUL-terminated "<type><path>" entries
// ListFilesArgv prints, sorted by path. A path that is absolute or climbs
// out with ".." is refused, and so is a listing of more than
// MaxListEntries entries: the listing came from the site and is not
// trusted.
func ParseFileList(out []byte) ([]FileEntry, error) {
	var ents []FileEntry
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("%w: file list entry %q has no path", backends.ErrBadOutput, f)
		}
		e := FileEntry{Type: f[0], Path: f[1:]}
		if path.IsAbs(e.Path) || e.Path == ".." || strings.HasPrefix(e.Path, "../") || strings.Contains(e.Path, "/../") || strings.HasSuffix(e.Path, "/..") {
			return nil, fmt.Errorf("%w: file list entry %q escapes the directory", backends.ErrBadOutput, e.Path)
		}
		if len(ents) == MaxListEntries {
			return nil, fmt.Errorf("%w: more than %d entries in the listing; refused", backends.ErrBadOutput, MaxListEntries)
		}
		ents = append(ents, e)
	}
	sort.Slice(ents, func(i, k int) bool { return ents[i].Path < ents[k].Path })
	return ents, nil
}

// Lines splits a command's output into its non-blank lines, without the
// carriage returns a terminal-minded program may add.
func Lines(out []byte) []string {
	var ls []string
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

// BadOutput is the error of a parser that cannot read a command's output:
// it wraps backends.ErrBadOutput and quotes the output (the first 2000
// bytes) after the detail (the first 500).
func BadOutput(what string, raw []byte, detail string) error {
	const max = 2000
	s := string(raw)
	if len(s) > max {
		s = s[:max] + "…"
	}
	if len(detail) > max/4 {
		detail = detail[:max/4] + "…"
	}
	return fmt.Errorf("%w: %s: %s; raw output: %q", backends.ErrBadOutput, what, detail, s)
}

// Chunks cuts ids into runs of at most n (n > 0), in order: one command
// per run keeps an argv far below the kernel's limits.
func Chunks(ids []backends.JobID, n int) [][]backends.JobID {
	var cs [][]backends.JobID
	for lo := 0; lo < len(ids); lo += n {
		cs = append(cs, ids[lo:min(lo+n, len(ids))])
	}
	return cs
}
