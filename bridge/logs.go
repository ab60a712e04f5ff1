package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// LogChunk is a piece of a job's standard output or error (Broker.ReadLog).
type LogChunk struct {
	ID       string         `json:"id"`
	State    JobState       `json:"state"`
	Stream   string         `json:"stream"`
	Part     int            `json:"part"`  // the component read (0 for a single-site job)
	Parts    int            `json:"parts"` // how many components the job has now
	Site     string         `json:"site,omitempty"`
	RemoteID backends.JobID `json:"remote_id,omitempty"`
	Offset   int64          `json:"offset"` // where Data starts in the stream
	Size     int64          `json:"size"`   // the stream's size so far
	Data     []byte         `json:"data"`   // base64 in JSON
	// Pending: nothing was submitted for this part yet (queued, reserved),
	// or its site cannot show a running job's output; read again later.
	Pending bool   `json:"pending,omitempty"`
	Note    string `json:"note,omitempty"` // why Data is empty, when it says more than Pending
}

// ReadLog reads part `part` of job id's stream (backends.StreamStdout or
// StreamStderr) from offset on, at most max bytes (backends.MaxLogRead),
// from the job's site: over SFTP from the job directory on SLURM and PBS
// sites (backends.LogReader), from the simulated site's buffer otherwise.
// A job not submitted yet reads as Pending with no data. An unknown job
// wraps ErrNotFound; a bad stream, part or offset wraps ErrBadRequest.
func (b *Broker) ReadLog(ctx context.Context, id string, part int, stream string, offset int64, max int) (LogChunk, error) {
	if backends.LogFile(stream) == "" {
		return LogChunk{}, fmt.Errorf("%w: log stream %q (want %s or %s)", ErrBadRequest, stream, backends.StreamStdout, backends.StreamStderr)
	}
	if offset < 0 || part < 0 {
		return LogChunk{}, fmt.Errorf("%w: offset %d and part %d must not be negative", ErrBadRequest, offset, part)
	}
	b.mu.Lock()
	j, ok := b.jobs[id]
	if !ok {
		b.mu.Unlock()
		return LogChunk{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	ch := LogChunk{ID: id, State: j.State, Stream: stream, Part: part, Parts: len(j.Comps), Offset: offset}
	if part >= len(j.Comps) || j.Comps[part].RemoteID == "" {
		b.mu.Unlock()
		if part > 0 && part >= len(j.Comps) && len(j.Comps) > 0 {
			return LogChunk{}, fmt.Errorf("%w: job %s has %d part(s); part %d does not exist", ErrBadRequest, id, len(j.Comps), part)
		}
		ch.Pending = true
		return ch, nil
	}
	c := j.Comps[part]
	spec := b.spec(j, part, len(j.Comps), c.Site, c.Nodes, policy.Option{})
	s, owner := b.siteIdx[c.Site], b.identityOwner(j)
	b.mu.Unlock()
	ch.Site, ch.RemoteID = c.Site, c.RemoteID
	be, err := b.backendFor(ctx, s, owner)
	if err != nil {
		return ch, err
	}
	lr, ok := be.(backends.LogReader)
	if !ok {
		ch.Pending, ch.Note = true, fmt.Sprintf("site %s cannot show a job's output while it runs", c.Site)
		return ch, nil
	}
	data, size, err := lr.ReadLog(ctx, c.RemoteID, spec, stream, offset, max)
	if err != nil {
		if errors.Is(err, backends.ErrUnsupported) {
			ch.Pending, ch.Note = true, err.Error()
			return ch, nil
		}
		return ch, err
	}
	ch.Data, ch.Size = data, size
	return ch, nil
}
