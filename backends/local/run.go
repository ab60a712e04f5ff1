//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gridsub/gridsub/backends"
)

const (
	syscallNoFollow = syscall.O_NOFOLLOW
	syscallNonblock = syscall.O_NONBLOCK
)

// wrapperScript is the job's process-group leader: /bin/sh -c wrapperScript
// gridsub-local-job <exit file> <program> <args...>. It is a constant; the
// job's words reach it as positional parameters and are run as "$@"
// (never parsed by the shell), and the program is an absolute path, so no
// shell builtin or function stands in for it. It records the exit code
// where a later Site finds it even when this process is gone.
const wrapperScript = `x=$1; shift; "$@"; rc=$?; printf '%d\n' "$rc" > "$x"; exit "$rc"`

// job is one job of the site. Its fields are guarded by Site.mu.
type job struct {
	rec     record
	busy    bool               // Submit is still copying its inputs
	holds   bool               // it holds rec.Nodes slots
	cmd     *exec.Cmd          // when this Site started it
	cancel  context.CancelFunc // the cmd's context: SIGTERM to the group
	adopted bool               // re-attached from an earlier Site
	wall    *time.Timer        // walltime
	esc     *time.Timer        // SIGKILL after the grace
	termAt  time.Time          // when SIGTERM was sent
}

func (j *job) final() bool {
	st, err := backends.ParseState(j.rec.State)
	return err == nil && st.Final()
}

func (j *job) state() backends.State {
	switch j.rec.State {
	case stPending:
		return backends.StatePending
	case stStarting, stRunning:
		return backends.StateRunning
	}
	st, _ := backends.ParseState(j.rec.State)
	return st
}

func (j *job) status() backends.JobStatus {
	st := backends.JobStatus{ID: backends.JobID(j.rec.ID), GridID: j.rec.GridID, Name: j.rec.Name, State: j.state(),
		Reason: j.rec.Reason, ExitCode: j.rec.Exit, Signal: j.rec.Signal, Start: j.rec.Start, End: j.rec.End}
	if !j.rec.Start.IsZero() {
		st.NodeList = "localhost"
	}
	if !st.State.Final() {
		st.ExitCode = -1
	}
	return st
}

func (j *job) stopTimers() {
	if j.wall != nil {
		j.wall.Stop()
	}
	if j.esc != nil {
		j.esc.Stop()
	}
}

// schedule starts queued jobs, strictly in order, while the head fits.
func (s *Site) schedule() {
	for len(s.queue) > 0 && !s.closed {
		j := s.queue[0]
		if j.rec.Nodes > s.cfg.Slots-s.used {
			j.rec.Reason = "Resources"
			for _, w := range s.queue[1:] {
				w.rec.Reason = "Priority"
			}
			return
		}
		s.queue = s.queue[1:]
		s.start(j)
	}
}

// finish makes j final (s.mu held) and gives its slots back; the caller
// then calls schedule.
func (s *Site) finish(j *job, st backends.State, code, sig int, reason string) {
	if j.final() {
		return
	}
	j.rec.State, j.rec.Exit, j.rec.Signal, j.rec.Reason, j.rec.End = st.String(), code, sig, reason, time.Now()
	if j.holds {
		s.used -= j.rec.Nodes
		j.holds = false
	}
	j.stopTimers()
	if j.cancel != nil {
		j.cancel()
	}
	if err := s.write(j); err != nil {
		s.log.Error("job ended but its record was not written", "job", j.rec.ID, "err", err)
	}
	s.log.Debug("job ended", "job", j.rec.ID, "grid_id", j.rec.GridID, "state", st, "exit", code, "reason", reason)
}

// ended makes a job whose leader is gone final (s.mu held): killed jobs
// are cancelled or timeout, the others completed or failed by the exit code
// the wrapper wrote, else by code and sig from the wait status (code -1,
// sig 0: unknown). why, when set, says how the end was found.
func (s *Site) ended(j *job, code, sig int, why string) {
	if c, ok := s.exitCode(j.rec.ID); ok {
		code, sig = c, 0
	}
	switch {
	case j.rec.Kill == killCancel:
		s.finish(j, backends.StateCancelled, code, sig, "cancelled")
	case j.rec.Kill == killWalltime:
		s.finish(j, backends.StateTimeout, code, sig, fmt.Sprintf("killed at its walltime of %s", j.rec.Walltime))
	case code < 0:
		what := "ended without recording an exit code (its wrapper was killed)"
		if sig != 0 {
			what = fmt.Sprintf("killed by signal %d before it recorded an exit code", sig)
		}
		if why != "" {
			what = why + ": " + what
		}
		s.finish(j, backends.StateFailed, -1, sig, what)
	default:
		if why == "" && code != 0 {
			why = "NonZeroExitCode"
		}
		s.finish(j, codeState(code), code, 0, why)
	}
}

// start runs j now (s.mu held): the job directory's stdout and stderr
// files, its work dir, its command, a process group of its own.
func (s *Site) start(j *job) {
	j.rec.State, j.rec.Start, j.rec.Reason, j.holds = stStarting, time.Now(), "", true
	s.used += j.rec.Nodes
	os.Remove(s.exitPath(j.rec.ID))
	if err := s.write(j); err != nil {
		s.finish(j, backends.StateFailed, -1, 0, "not started: "+err.Error())
		return
	}
	cmd, files, err := s.command(j)
	if err == nil {
		err = cmd.Start()
	}
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		code := -1
		var nf *notFound
		if errors.As(err, &nf) {
			code = 127
		}
		s.log.Warn("job not started", "job", j.rec.ID, "err", err)
		s.finish(j, backends.StateFailed, code, 0, "not started: "+err.Error())
		return
	}
	j.cmd = cmd
	pid := cmd.Process.Pid
	j.rec.Pid, j.rec.PidStart, j.rec.Boot, j.rec.State = pid, procStart(pid), s.boot, stRunning
	if err := s.write(j); err != nil {
		// The job runs; only a restart before its end would lose it.
		s.log.Error("job started but its record was not written", "job", j.rec.ID, "err", err)
	}
	s.armWalltime(j)
	go s.wait(j, cmd)
}

type notFound struct{ name string }

func (e *notFound) Error() string {
	return fmt.Sprintf("command %q not found in the job's PATH", e.name)
}

// command builds j's process; files are the parent's copies of its
// stdout and stderr, to close once it started.
func (s *Site) command(j *job) (*exec.Cmd, []*os.File, error) {
	dir, err := s.root.OpenRoot(j.rec.Tag)
	if err != nil {
		return nil, nil, fmt.Errorf("opening job directory: %w", err)
	}
	defer dir.Close()
	var files []*os.File
	for _, n := range []string{StdoutFile, StderrFile} {
		f, err := dir.OpenFile(n, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, nil, fmt.Errorf("creating %s: %w", n, err)
		}
		files = append(files, f)
	}
	jobDir := filepath.Join(s.cfg.Root, j.rec.Tag)
	work := jobDir
	if j.rec.WorkDir != "" {
		wd, err := s.workDir(dir, jobDir, j.rec.WorkDir)
		if err != nil {
			return nil, files, err
		}
		work = wd
	}
	env := s.env(j, jobDir)
	var argv []string
	if j.rec.Script {
		argv = []string{s.shell, filepath.Join(jobDir, scriptFile)}
	} else {
		prog, err := lookPath(j.rec.Command[0], envValue(env, "PATH"), work)
		if err != nil {
			fmt.Fprintf(files[1], "gridsub local site: %v\n", err)
			return nil, files, err
		}
		argv = append([]string{prog}, j.rec.Command[1:]...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", wrapperScript, "gridsub-local-job", s.exitPath(j.rec.ID)}, argv...)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, env, files[0], files[1]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGTERM) }
	j.cancel = cancel
	return cmd, files, nil
}

// workDir creates the work dir inside the job directory and returns its
// path, refusing one that resolves outside it.
func (s *Site) workDir(dir *os.Root, jobDir, rel string) (string, error) {
	c, err := relPath("work dir", rel)
	if err != nil {
		return "", err
	}
	if err := dir.MkdirAll(c, 0o755); err != nil {
		return "", fmt.Errorf("creating work dir %s: %w", rel, err)
	}
	realJob, err := filepath.EvalSymlinks(jobDir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(jobDir, c))
	if err != nil {
		return "", err
	}
	if r, err := filepath.Rel(realJob, real); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("%w: work dir %s leads out of the job directory", backends.ErrInvalidSpec, rel)
	}
	return real, nil
}

// env is the job's environment: the passed-through variables, the spec's,
// then gridsub's own.
func (s *Site) env(j *job, jobDir string) []string {
	m := map[string]string{}
	for _, kv := range s.baseEnv {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	for k, v := range j.rec.Env {
		m[k] = v
	}
	m["GRIDSUB_GRID_ID"], m["GRIDSUB_JOB_DIR"], m["GRIDSUB_JOB_ID"] = j.rec.GridID, jobDir, j.rec.ID
	m["GRIDSUB_NODES"] = strconv.Itoa(j.rec.Nodes)
	if _, ok := m["PATH"]; !ok {
		m["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func envValue(env []string, k string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds name as execve's callers do, in the job's PATH (relative
// entries relative to the work dir); a name with a slash is used as given.
func lookPath(name, pathEnv, work string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(work, p)
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &notFound{name}
}

// wait reaps a job this Site started and ends it.
func (s *Site) wait(j *job, cmd *exec.Cmd) {
	werr := cmd.Wait()
	code, sig := -1, 0
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig = int(ws.Signal())
		} else {
			code = ps.ExitCode()
		}
	}
	s.reap(j, cmd.Process.Pid, code, sig, werr)
}

// reap ends a job whose leader is gone: the processes it left in its group
// get SIGTERM, then SIGKILL at the grace, and the job is made final.
func (s *Site) reap(j *job, pid, code, sig int, werr error) {
	s.mu.Lock()
	if s.closed { // the next Site on the root finishes it from the exit file
		s.mu.Unlock()
		return
	}
	deadline := time.Now().Add(s.cfg.KillGrace)
	if !j.termAt.IsZero() {
		deadline = j.termAt.Add(s.cfg.KillGrace)
	}
	s.mu.Unlock()
	sweep(pid, deadline)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if werr != nil && code < 0 && sig == 0 {
		s.log.Warn("waiting for a job failed", "job", j.rec.ID, "err", werr)
	}
	s.ended(j, code, sig, "")
	s.schedule()
}

// armWalltime kills j at its start + walltime (s.mu held).
func (s *Site) armWalltime(j *job) {
	j.wall = time.AfterFunc(time.Until(j.rec.Start.Add(j.rec.Walltime)), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.closed {
			s.kill(j, killWalltime)
		}
	})
}

// kill cancels a pending job, or starts stopping a running one (s.mu held):
// SIGTERM to its group now, SIGKILL after the grace. The job is final once
// its processes are gone.
func (s *Site) kill(j *job, why string) {
	if j.final() {
		return
	}
	if j.rec.State == stPending {
		for i, q := range s.queue {
			if q == j {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				break
			}
		}
		j.rec.Kill = why
		s.finish(j, backends.StateCancelled, -1, 0, "cancelled while pending")
		s.schedule()
		return
	}
	if j.rec.Kill != "" {
		return
	}
	j.rec.Kill, j.termAt = why, time.Now()
	j.rec.Reason = "cancelling"
	if why == killWalltime {
		j.rec.Reason = "walltime reached: terminating"
	}
	if err := s.write(j); err != nil {
		s.log.Error("recording a kill", "job", j.rec.ID, "err", err)
	}
	pid := j.rec.Pid
	switch {
	case j.cmd != nil:
		j.cancel() // cmd.Cancel: SIGTERM to the group
	case s.alive(j):
		signalGroup(pid, syscall.SIGTERM)
	}
	j.esc = time.AfterFunc(s.cfg.KillGrace, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if j.final() || s.closed {
			return
		}
		if j.cmd != nil || s.alive(j) {
			signalGroup(pid, syscall.SIGKILL)
		}
	})
}

// signalGroup signals the process group pgid; a group that is gone is not
// an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// groupGone reports whether no process is left in the group.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// sweep ends what is left of a process group whose leader has exited:
// SIGTERM, then SIGKILL at deadline, and waits (bounded) until it is empty.
func sweep(pgid int, deadline time.Time) {
	if pgid <= 1 || groupGone(pgid) {
		return
	}
	signalGroup(pgid, syscall.SIGTERM)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if groupGone(pgid) {
			return
		}
	}
	signalGroup(pgid, syscall.SIGKILL)
	for range 250 {
		if groupGone(pgid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adopt re-attaches a running job an earlier Site started (s.mu held):
// its slots are held, its walltime enforced, its end noticed by polling.
func (s *Site) adopt(j *job) {
	j.adopted, j.holds = true, true
	s.used += j.rec.Nodes
	s.log.Info("re-attached a running job", "job", j.rec.ID, "grid_id", j.rec.GridID, "pid", j.rec.Pid)
	if j.rec.Kill != "" { // asked before the restart: stop it again
		why := j.rec.Kill
		j.rec.Kill = ""
		s.kill(j, why)
	} else {
		s.armWalltime(j)
	}
	go s.watch(j)
}

// watch polls a re-attached job until its leader is gone.
func (s *Site) watch(j *job) {
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		gone := !s.alive(j)
		s.mu.Unlock()
		if gone {
			s.reap(j, j.rec.Pid, -1, 0, nil)
			return
		}
	}
}

// alive reports whether j's leader is still the process it started as.
func (s *Site) alive(j *job) bool {
	if j.rec.Pid <= 1 {
		return false
	}
	if j.rec.Boot != "" && s.boot != "" && j.rec.Boot != s.boot {
		return false // the machine rebooted since
	}
	if err := syscall.Kill(j.rec.Pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, start, ok := procStat(j.rec.Pid)
	if !ok {
		return j.rec.PidStart == 0 // no /proc: the pid is all there is
	}
	return st != 'Z' && st != 'X' && (j.rec.PidStart == 0 || start == j.rec.PidStart)
}

// procStat reads a process's state and start time (clock ticks since boot)
// from /proc/<pid>/stat.
func procStat(pid int) (state byte, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil || len(f[0]) == 0 {
		return 0, 0, false
	}
	return f[0][0], start, true
}

func procStart(pid int) uint64 {
	_, start, _ := procStat(pid)
	return start
}

// bootID is Linux's boot id ("" elsewhere).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
