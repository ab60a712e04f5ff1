//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Names in the root and the job directory.
const (
	stateDirName = ".gridsub"        // <Root>/.gridsub: records, exit codes, lock
	StdoutFile   = "gridsub.out"     // the job's standard output, in its directory
	StderrFile   = "gridsub.err"     // the job's standard error
	scriptFile   = ".gridsub-job.sh" // JobSpec.Script, in the job directory
	maxRecord    = 1 << 20           // a record larger than this is refused
)

const recordVersion = 1

// Internal states of a record besides backends' final state names.
const (
	stPending  = "pending"
	stStarting = "starting" // written before the fork: seen after a crash, the job is lost
	stRunning  = "running"
)

// Why a job is being killed.
const (
	killCancel   = "cancel"
	killWalltime = "walltime"
)

// record is what the state file <id>.json holds. It is everything a later
// Site needs to answer for the job, start it when it was pending, or
// re-attach it when it runs.
type record struct {
	V        int               `json:"v"`
	ID       string            `json:"id"`
	GridID   string            `json:"grid_id"`
	Tag      string            `json:"tag"`
	Name     string            `json:"name,omitempty"`
	Command  []string          `json:"command,omitempty"`
	Script   bool              `json:"script,omitempty"` // the script is <tag>/.gridsub-job.sh
	Env      map[string]string `json:"env,omitempty"`
	WorkDir  string            `json:"work_dir,omitempty"`
	Nodes    int               `json:"nodes"`
	Cores    int               `json:"cores,omitempty"`
	Walltime time.Duration     `json:"walltime"`
	Outputs  []string          `json:"outputs,omitempty"`
	State    string            `json:"state"`
	Reason   string            `json:"reason,omitempty"`
	Exit     int               `json:"exit"`
	Signal   int               `json:"signal,omitempty"`
	Submit   time.Time         `json:"submit"`
	Start    time.Time         `json:"start,omitzero"`
	End      time.Time         `json:"end,omitzero"`
	Pid      int               `json:"pid,omitempty"`
	PidStart uint64            `json:"pid_start,omitempty"` // /proc/<pid>/stat starttime, 0 = unknown
	Boot     string            `json:"boot,omitempty"`      // boot id when the job started
	Kill     string            `json:"kill,omitempty"`      // "cancel" or "walltime" once asked
}

func (s *Site) recordPath(id string) string { return filepath.Join(s.stateDir, id+".json") }
func (s *Site) exitPath(id string) string   { return filepath.Join(s.stateDir, id+".exit") }

// write stores j's record atomically (temporary file, then rename).
func (s *Site) write(j *job) error {
	b, err := json.Marshal(&j.rec)
	if err != nil {
		return fmt.Errorf("%s: encoding the record of job %s: %w", s.cfg.Name, j.rec.ID, err)
	}
	f, err := os.CreateTemp(s.stateDir, j.rec.ID+".json.tmp-*")
	if err != nil {
		return fmt.Errorf("%s: writing the record of job %s: %w", s.cfg.Name, j.rec.ID, err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%s: writing the record of job %s: %w", s.cfg.Name, j.rec.ID, err)
	}
	if err := os.Rename(f.Name(), s.recordPath(j.rec.ID)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%s: writing the record of job %s: %w", s.cfg.Name, j.rec.ID, err)
	}
	return nil
}

// readSmall reads a regular file (not a symbolic link) of at most limit bytes.
func readSmall(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscallNoFollow|syscallNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, limit)
	}
	return b, nil
}

// exitCode reads the code the wrapper wrote; ok is false without one.
func (s *Site) exitCode(id string) (code int, ok bool) {
	b, err := readSmall(s.exitPath(id), 64)
	if err != nil {
		return -1, false
	}
	c, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1, false
	}
	return c, true
}

// load reads the records of earlier Sites on this root, in job order, and
// brings each job back: final jobs as they were, pending jobs queued again,
// running jobs re-attached or ended from their exit code.
func (s *Site) load() error {
	ents, err := os.ReadDir(s.stateDir)
	if err != nil {
		return fmt.Errorf("%w: reading %s: %w", ErrConfig, s.stateDir, err)
	}
	type numbered struct {
		n    int64
		name string
	}
	var recs []numbered
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			if strings.Contains(e.Name(), ".json.tmp-") { // a write cut short
				os.Remove(filepath.Join(s.stateDir, e.Name()))
			}
			continue
		}
		n, err := strconv.ParseInt(base, 10, 64)
		if err != nil || n < 1 || strconv.FormatInt(n, 10) != base {
			continue
		}
		recs = append(recs, numbered{n, e.Name()})
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].n < recs[b].n })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		p := filepath.Join(s.stateDir, r.name)
		b, err := readSmall(p, maxRecord)
		if err != nil {
			return fmt.Errorf("local site: job record %s cannot be read (%w); move it away to start without that job", p, err)
		}
		j := &job{}
		if err := json.Unmarshal(b, &j.rec); err != nil {
			return fmt.Errorf("local site: job record %s is not valid JSON (%w); move it away to start without that job", p, err)
		}
		if j.rec.V != recordVersion || j.rec.ID != strconv.FormatInt(r.n, 10) || !gridIDRe().MatchString(j.rec.GridID) || j.rec.Nodes < 1 {
			return fmt.Errorf("local site: job record %s is not a version %d record of job %d; move it away to start without that job", p, recordVersion, r.n)
		}
		if _, err := relPath("tag", j.rec.Tag); err != nil || strings.Contains(j.rec.Tag, "/") {
			return fmt.Errorf("local site: job record %s names the job directory %q; move it away to start without that job", p, j.rec.Tag)
		}
		s.next = max(s.next, r.n+1)
		s.jobs[backends.JobID(j.rec.ID)] = j
		s.byGrid[j.rec.GridID] = append(s.byGrid[j.rec.GridID], j)
		s.revive(j)
	}
	return nil
}

// revive brings one loaded job back (s.mu held).
func (s *Site) revive(j *job) {
	switch j.rec.State {
	case stPending:
		s.queue = append(s.queue, j)
	case stStarting:
		if code, ok := s.exitCode(j.rec.ID); ok {
			s.finish(j, codeState(code), code, 0, "ended while the site plugin was down")
			return
		}
		s.finish(j, backends.StateLost, -1, 0, "the site plugin stopped while starting the job: it may or may not have run")
	case stRunning:
		if s.alive(j) {
			s.adopt(j)
			return
		}
		s.ended(j, -1, 0, "ended while the site plugin was down")
	default:
		if st, err := backends.ParseState(j.rec.State); err != nil || !st.Final() {
			s.finish(j, backends.StateLost, -1, 0, fmt.Sprintf("unreadable state %q in the job record", j.rec.State))
		}
	}
}

// codeState is the final state of a job that exited with code.
func codeState(code int) backends.State {
	if code == 0 {
		return backends.StateCompleted
	}
	return backends.StateFailed
}
