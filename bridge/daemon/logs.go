package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

var _ api.LogSource = (*service)(nil)

// ReadLog implements api.LogSource: the broker reads the stream at the
// job's site; a job that ended and that the site can no longer show (or
// that ended before the daemon's last restart) is read from its fetched
// outputs (<output dir>/gridsub.out or .err; the part's file for a
// co-allocated job).
func (s *service) ReadLog(ctx context.Context, id string, part int, stream string, offset int64, max int) (bridge.LogChunk, error) {
	ch, err := s.b.ReadLog(ctx, id, part, stream, offset, max)
	if err == nil && !(ch.Pending && ch.State.Final()) {
		return ch, nil
	}
	if err != nil && errors.Is(err, bridge.ErrBadRequest) {
		return ch, err
	}
	j, jerr := s.Job(id)
	if jerr != nil || !j.State.Final() {
		if err != nil {
			return ch, err
		}
		return ch, jerr
	}
	local := fetchedLog(j, part, stream)
	if local == "" {
		if err != nil {
			return ch, err
		}
		ch.Note = fmt.Sprintf("job %s %s and its %s was not fetched", j.ID, j.State, backends.LogFile(stream))
		if j.Start.IsZero() && len(j.Comps) == 0 {
			ch.Note = fmt.Sprintf("job %s %s before it ran: it wrote no output", j.ID, j.State)
		}
		return ch, nil
	}
	data, size, rerr := readLocal(local, offset, max)
	if rerr != nil {
		return ch, rerr
	}
	return bridge.LogChunk{ID: j.ID, State: j.State, Stream: stream, Part: part, Parts: len(j.Comps),
		Offset: offset, Size: size, Data: data, Note: "from the fetched output " + local}, nil
}

// fetchedLog is the fetched file of a stream of part `part`, "" if none.
func fetchedLog(j *bridge.Job, part int, stream string) string {
	name := backends.LogFile(stream)
	k := 0
	for _, p := range j.Outputs {
		if filepath.Base(p) == name {
			if k == part {
				return p
			}
			k++
		}
	}
	return ""
}

// readLocal reads at most max bytes of a regular file (not a link) from
// offset on, and its size.
func readLocal(p string, offset int64, max int) ([]byte, int64, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, 0, fmt.Errorf("fetched output: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%w: fetched output %s is not a regular file", bridge.ErrBadRequest, p)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("fetched output: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("fetched output: %w", err)
	}
	size := st.Size()
	if offset >= size {
		return nil, size, nil
	}
	buf := make([]byte, min(int64(backends.LogMax(max)), size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, size, fmt.Errorf("fetched output: %w", err)
	}
	return buf[:n], size, nil
}
