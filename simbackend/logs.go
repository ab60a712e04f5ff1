package simbackend

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

var _ backends.LogReader = (*Site)(nil)

// logText is what a simulated job wrote so far (the site's buffer of its
// output): a line when it started and one when it ended on stdout, the
// reason it was killed on stderr. It only grows, so a follower reading by
// offset sees each line once. Times are virtual.
func (s *Site) logText(js backends.JobSpec, st backends.JobStatus, ran bool) (stdout, stderr string) {
	what := strings.Join(js.Command, " ")
	if what == "" {
		what = "(script)"
	}
	name := js.Name
	if name == "" {
		name = js.GridID
	}
	if !ran {
		if st.State.Final() {
			return fmt.Sprintf("[gridsub sim] %s: %s never started on %s: %s at %s (virtual time)\n",
				name, what, s.cfg.Name, st.Reason, st.End.UTC().Format(time.RFC3339)), ""
		}
		return "", ""
	}
	stdout = fmt.Sprintf("[gridsub sim] %s: %s started on %s nodes %d at %s (virtual time)\n",
		name, what, s.cfg.Name, js.Nodes, st.Start.UTC().Format(time.RFC3339))
	if !st.State.Final() {
		return stdout, ""
	}
	var how string
	switch st.State {
	case backends.StateCompleted, backends.StateFailed:
		how = fmt.Sprintf("exit %d", st.ExitCode)
	case backends.StateTimeout:
		how = "killed: " + st.Reason
		stderr = fmt.Sprintf("[gridsub sim] %s: killed: %s\n", name, st.Reason)
	default:
		how = "cancelled"
	}
	stdout += fmt.Sprintf("[gridsub sim] %s: %s ran on %s nodes %d from %s to %s (virtual time), %s\n",
		name, what, s.cfg.Name, js.Nodes, st.Start.UTC().Format(time.RFC3339), st.End.UTC().Format(time.RFC3339), how)
	return stdout, stderr
}

// ReadLog implements backends.LogReader from the site's buffer: the
// output the simulated job has produced so far (logText), by offset.
func (s *Site) ReadLog(ctx context.Context, id backends.JobID, _ *backends.JobSpec, stream string, offset int64, max int) ([]byte, int64, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, 0, err
	}
	if backends.LogFile(stream) == "" || offset < 0 {
		return nil, 0, fmt.Errorf("sim site %s: %w: log stream %q from %d", s.cfg.Name, backends.ErrInvalidSpec, stream, offset)
	}
	s.lock()
	j := s.job(id)
	if j == nil {
		s.unlock()
		return nil, 0, fmt.Errorf("sim site %s: %w: %q", s.cfg.Name, backends.ErrUnknownJob, id)
	}
	st, js, ran := s.status(j), j.spec, j.startSeq > 0
	s.unlock()
	out, errText := s.logText(js, st, ran)
	text := out
	if stream == backends.StreamStderr {
		text = errText
	}
	size := int64(len(text))
	if offset >= size {
		return nil, size, nil
	}
	end := min(size, offset+int64(backends.LogMax(max)))
	return []byte(text[offset:end]), size, nil
}
