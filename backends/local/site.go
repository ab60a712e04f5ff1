//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Errors of this package; the Backend methods wrap backends' sentinels.
var (
	// ErrConfig: the Config cannot be used (the field is named).
	ErrConfig = errors.New("local site: bad config")
	// ErrRootInUse: another Site (in this or another process) owns the root.
	ErrRootInUse = errors.New("local site: root in use by another site")
	// ErrClosed: the Site was closed. It wraps backends.ErrUnavailable.
	ErrClosed = fmt.Errorf("local site: site closed: %w", backends.ErrUnavailable)
)

// Config describes one local site.
type Config struct {
	// Name is the site name (default "local").
	Name string
	// Root holds the job directories (<Root>/<tag>/) and the state directory
	// (<Root>/.gridsub/). Required; created (0700) when missing.
	Root string
	// Slots is the number of "nodes" jobs share (default 1).
	Slots int
	// CoresPerNode is what Info reports per slot (default runtime.NumCPU()).
	CoresPerNode int
	// Shell runs JobSpec.Script (default: bash from PATH, else /bin/sh).
	Shell string
	// KillGrace is the time between SIGTERM and SIGKILL (default 10s).
	KillGrace time.Duration
	// MaxInputBytes bounds one staged input (default 1 GiB).
	MaxInputBytes int64
	// MaxOutputBytes bounds one fetched output (default 1 GiB).
	MaxOutputBytes int64
	// MaxOutputFiles bounds the files one FetchOutputs copies (default 10000).
	MaxOutputFiles int
	// PassEnv names the variables of the plugin's own environment a job
	// gets (nil: PATH HOME USER LOGNAME LANG LC_ALL TZ TMPDIR). Anything
	// else must come from JobSpec.Env: the plugin's environment (go-plugin's
	// variables among them) does not leak into jobs.
	PassEnv []string
	// Poll is how often a re-attached job (one this process did not start)
	// is checked for its end (default 250ms).
	Poll   time.Duration
	Logger *slog.Logger
}

var defaultPassEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// Site is a local batch system. It is safe for concurrent use.
type Site struct {
	cfg      Config
	root     *os.Root // cfg.Root
	stateDir string   // <Root>/.gridsub
	lock     *os.File // flock held while the Site is open
	shell    string
	baseEnv  []string
	boot     string // the boot id, "" when unknown
	log      *slog.Logger

	mu     sync.Mutex
	jobs   map[backends.JobID]*job
	byGrid map[string][]*job
	queue  []*job // pending, FIFO
	used   int    // slots held by running (and dying) jobs
	next   int64  // next job number
	closed bool
	stop   chan struct{} // closed by Close: ends the pollers of re-attached jobs
}

var (
	_ backends.Backend = (*Site)(nil)
	_ backends.Finder  = (*Site)(nil)
	_ backends.Fetcher = (*Site)(nil)
)

// New opens (or creates) the site at cfg.Root: it takes the root's lock,
// reads the job records left by earlier Sites, re-attaches the jobs still
// running, queues the pending ones again and starts what fits.
func New(cfg Config) (*Site, error) {
	if cfg.Name == "" {
		cfg.Name = "local"
	}
	switch {
	case cfg.Root == "":
		return nil, fmt.Errorf("%w: root: a directory for the job directories is required", ErrConfig)
	case cfg.Slots < 0:
		return nil, fmt.Errorf("%w: slots must be >= 1, got %d", ErrConfig, cfg.Slots)
	case cfg.CoresPerNode < 0:
		return nil, fmt.Errorf("%w: cores_per_node must be >= 1, got %d", ErrConfig, cfg.CoresPerNode)
	case cfg.KillGrace < 0 || cfg.MaxInputBytes < 0 || cfg.MaxOutputBytes < 0 || cfg.MaxOutputFiles < 0 || cfg.Poll < 0:
		return nil, fmt.Errorf("%w: kill grace, size limits and poll interval must not be negative", ErrConfig)
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	if cfg.CoresPerNode == 0 {
		cfg.CoresPerNode = runtime.NumCPU()
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 10 * time.Second
	}
	if cfg.MaxInputBytes == 0 {
		cfg.MaxInputBytes = 1 << 30
	}
	if cfg.MaxOutputBytes == 0 {
		cfg.MaxOutputBytes = 1 << 30
	}
	if cfg.MaxOutputFiles == 0 {
		cfg.MaxOutputFiles = 10000
	}
	if cfg.Poll == 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.PassEnv == nil {
		cfg.PassEnv = defaultPassEnv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	abs, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("%w: root %q: %w", ErrConfig, cfg.Root, err)
	}
	cfg.Root = abs
	shell := cfg.Shell
	if shell == "" {
		if shell, err = exec.LookPath("bash"); err != nil {
			shell = "/bin/sh"
		}
	}
	if !filepath.IsAbs(shell) {
		if shell, err = exec.LookPath(shell); err != nil {
			return nil, fmt.Errorf("%w: shell %q: %w", ErrConfig, cfg.Shell, err)
		}
	}
	if err := os.MkdirAll(cfg.Root, 0o700); err != nil {
		return nil, fmt.Errorf("%w: root: %w", ErrConfig, err)
	}
	s := &Site{cfg: cfg, shell: shell, stateDir: filepath.Join(cfg.Root, stateDirName), boot: bootID(),
		log: cfg.Logger.With("site", cfg.Name, "backend", "local"), jobs: map[backends.JobID]*job{},
		byGrid: map[string][]*job{}, next: 1, stop: make(chan struct{})}
	for _, k := range cfg.PassEnv {
		if v, ok := os.LookupEnv(k); ok {
			s.baseEnv = append(s.baseEnv, k+"="+v)
		}
	}
	if err := os.Mkdir(s.stateDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: state directory: %w", ErrConfig, err)
	}
	if fi, err := os.Lstat(s.stateDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: state directory %s is not a directory", ErrConfig, s.stateDir)
	}
	if s.lock, err = lockRoot(s.stateDir); err != nil {
		return nil, err
	}
	if s.root, err = os.OpenRoot(cfg.Root); err != nil {
		s.lock.Close()
		return nil, fmt.Errorf("%w: root: %w", ErrConfig, err)
	}
	if err := s.load(); err != nil {
		s.root.Close()
		s.lock.Close()
		return nil, err
	}
	s.mu.Lock()
	s.schedule()
	s.mu.Unlock()
	return s, nil
}

// lockRoot takes an exclusive, non-blocking flock on <state>/lock.
func lockRoot(stateDir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(stateDir, "lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: lock file: %w", ErrConfig, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (another gridsub runs this site, perhaps the daemon: submit to it without --embedded, or stop it first)", ErrRootInUse, filepath.Dir(stateDir))
		}
		return nil, fmt.Errorf("%w: locking %s: %w", ErrConfig, stateDir, err)
	}
	return f, nil
}

// Close releases the root. Jobs keep running: a later Site on the same root
// re-attaches them. Calls after Close fail with ErrClosed.
func (s *Site) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, j := range s.jobs {
		j.stopTimers()
	}
	close(s.stop)
	s.mu.Unlock()
	err := s.root.Close()
	return errors.Join(err, s.lock.Close())
}

// Name is the site name.
func (s *Site) Name() string { return s.cfg.Name }

func (s *Site) ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", s.cfg.Name, err)
	}
	return nil
}

// Info reports the slots as nodes, the free ones, the queue and one Busy
// block per running job until its walltime.
func (s *Site) Info(ctx context.Context) (*backends.SiteInfo, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	info := &backends.SiteInfo{Name: s.cfg.Name, Kind: "local", Nodes: s.cfg.Slots, FreeNodes: s.cfg.Slots - s.used,
		CoresPerNode: s.cfg.CoresPerNode, Partitions: []string{"local"}, Queued: len(s.queue)}
	for _, j := range s.jobs {
		if j.holds {
			info.Running++
			info.Busy = append(info.Busy, backends.Allocation{Nodes: j.rec.Nodes, Until: j.rec.Start.Add(j.rec.Walltime)})
		}
	}
	sort.Slice(info.Busy, func(a, b int) bool { return info.Busy[a].Until.Before(info.Busy[b].Until) })
	return info, nil
}

var (
	gridIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`) })
	envKeyRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
)

// tagOf is the job directory's name: the grid id, or <grid id>-<k> for
// component k of a co-allocated job (as backends/slurm names them).
func tagOf(spec *backends.JobSpec) string {
	if spec.Components > 1 {
		return spec.GridID + "-" + strconv.Itoa(spec.Component)
	}
	return spec.GridID
}

// relPath checks a path that must stay inside the job directory and
// returns it cleaned.
func relPath(what, p string) (string, error) {
	c := path.Clean(p)
	if p == "" || path.IsAbs(p) || c == "." || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return "", fmt.Errorf("%w: %s %q must be a relative path inside the job directory", backends.ErrInvalidSpec, what, p)
	}
	return c, nil
}

// check adds this site's requirements to JobSpec.Validate.
func (s *Site) check(spec *backends.JobSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	switch {
	case !gridIDRe().MatchString(spec.GridID):
		return fmt.Errorf("%w: grid id %q must be 1-128 letters, digits, '.', '_' or '-' (it names the job directory)", backends.ErrInvalidSpec, spec.GridID)
	case spec.Nodes > s.cfg.Slots:
		return fmt.Errorf("%w: the job asks for %d nodes; %s has %d slots", backends.ErrInvalidSpec, spec.Nodes, s.cfg.Name, s.cfg.Slots)
	case spec.CoresPerNode < 0 || spec.CoresPerNode > s.cfg.CoresPerNode:
		return fmt.Errorf("%w: cores per node must be 0..%d on %s, got %d", backends.ErrInvalidSpec, s.cfg.CoresPerNode, s.cfg.Name, spec.CoresPerNode)
	case spec.Components > 1 && (spec.Component < 0 || spec.Component >= spec.Components):
		return fmt.Errorf("%w: component %d of %d", backends.ErrInvalidSpec, spec.Component, spec.Components)
	case spec.Reservation != "":
		return fmt.Errorf("%w: %s has no reservations (job asks for %q)", backends.ErrUnsupported, s.cfg.Name, spec.Reservation)
	case strings.ContainsRune(spec.Script, 0):
		return fmt.Errorf("%w: script contains a NUL byte", backends.ErrInvalidSpec)
	}
	for i, w := range spec.Command {
		if strings.ContainsRune(w, 0) || (i == 0 && w == "") {
			return fmt.Errorf("%w: command word %d %q is empty or contains a NUL byte", backends.ErrInvalidSpec, i, w)
		}
	}
	for k, v := range spec.Env {
		if !envKeyRe().MatchString(k) {
			return fmt.Errorf("%w: environment name %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", backends.ErrInvalidSpec, k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: environment variable %s contains a NUL byte", backends.ErrInvalidSpec, k)
		}
	}
	if spec.WorkDir != "" {
		if _, err := relPath("work dir", spec.WorkDir); err != nil {
			return err
		}
	}
	for _, in := range spec.Inputs {
		if _, err := relPath("input", in.Remote); err != nil {
			return err
		}
		if in.Local == "" {
			return fmt.Errorf("%w: input %q has no local path", backends.ErrInvalidSpec, in.Remote)
		}
	}
	for _, o := range spec.Outputs {
		if _, err := relPath("output", o); err != nil {
			return err
		}
	}
	return nil
}

// Submit checks the spec, creates the job directory, copies the inputs into
// it, records the job and queues it; it starts at once when the queue is
// empty and its slots are free. A grid id (component) whose earlier job is
// still pending or running is refused with ErrRejected: a job never runs
// twice by mistake.
func (s *Site) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	if err := s.ctxErr(ctx); err != nil {
		return "", err
	}
	if err := s.check(spec); err != nil {
		return "", fmt.Errorf("%s: %w", s.cfg.Name, err)
	}
	tag := tagOf(spec)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", ErrClosed
	}
	for _, o := range s.byGrid[spec.GridID] {
		if o.rec.Tag == tag && (o.busy || !o.final()) {
			s.mu.Unlock()
			return "", fmt.Errorf("%w: %s: job %s with tag %s is still %s; cancel it or wait for its end", backends.ErrRejected, s.cfg.Name, o.rec.ID, tag, o.state())
		}
	}
	id := backends.JobID(strconv.FormatInt(s.next, 10))
	s.next++
	// The tag is reserved while the inputs are copied (outside the lock).
	j := &job{rec: record{V: recordVersion, ID: string(id), GridID: spec.GridID, Tag: tag, Name: spec.Name,
		Command: append([]string(nil), spec.Command...), Script: spec.Script != "", Env: copyEnv(spec.Env), WorkDir: spec.WorkDir,
		Nodes: spec.Nodes, Cores: spec.CoresPerNode, Walltime: spec.Walltime, Outputs: append([]string(nil), spec.Outputs...),
		State: stPending, Exit: -1, Submit: time.Now()}, busy: true}
	s.byGrid[spec.GridID] = append(s.byGrid[spec.GridID], j)
	s.mu.Unlock()

	err := s.prepare(ctx, j, spec)
	s.mu.Lock()
	defer s.mu.Unlock()
	j.busy = false
	if err == nil && s.closed {
		err = ErrClosed
	}
	if err == nil {
		err = s.write(j)
	}
	if err != nil {
		s.forget(j)
		return "", err
	}
	s.jobs[id] = j
	s.queue = append(s.queue, j)
	s.log.Debug("submitted", "grid_id", spec.GridID, "job", id, "dir", tag)
	s.schedule()
	return id, nil
}

// forget drops a job that was never recorded.
func (s *Site) forget(j *job) {
	l := s.byGrid[j.rec.GridID]
	for i, o := range l {
		if o == j {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(s.byGrid, j.rec.GridID)
	} else {
		s.byGrid[j.rec.GridID] = l
	}
}

func copyEnv(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// prepare creates the job directory, stages the inputs and writes the script.
func (s *Site) prepare(ctx context.Context, j *job, spec *backends.JobSpec) error {
	if err := s.root.Mkdir(j.rec.Tag, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s: creating job directory %s: %w", s.cfg.Name, j.rec.Tag, err)
	}
	if fi, err := s.root.Lstat(j.rec.Tag); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s: job directory %s is not a directory", backends.ErrRejected, s.cfg.Name, j.rec.Tag)
	}
	dir, err := s.root.OpenRoot(j.rec.Tag)
	if err != nil {
		return fmt.Errorf("%s: opening job directory %s: %w", s.cfg.Name, j.rec.Tag, err)
	}
	defer dir.Close()
	for _, in := range spec.Inputs {
		if err := s.stage(ctx, dir, in); err != nil {
			return err
		}
	}
	if spec.Script != "" {
		if err := writeFile(dir, scriptFile, []byte(spec.Script), 0o700); err != nil {
			return fmt.Errorf("%s: writing the script: %w", s.cfg.Name, err)
		}
	}
	return nil
}

// Status answers for every id from the site's records, in order; an id the
// site never issued is StateLost.
func (s *Site) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := make([]backends.JobStatus, len(ids))
	for i, id := range ids {
		if j, ok := s.jobs[id]; ok {
			out[i] = j.status()
		} else {
			out[i] = backends.JobStatus{ID: id, State: backends.StateLost, ExitCode: -1, Reason: "no record of this job at " + s.cfg.Name}
		}
	}
	return out, nil
}

// Cancel removes a pending job from the queue, or stops a running one:
// SIGTERM to its process group, SIGKILL after KillGrace. The job is
// cancelled once its processes are gone. Cancelling a job that has ended is
// not an error.
func (s *Site) Cancel(ctx context.Context, id backends.JobID) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("%w: %s has no job %q", backends.ErrUnknownJob, s.cfg.Name, id)
	}
	s.kill(j, killCancel)
	return nil
}

// FindByGridID returns every job of the grid id (all its components), in
// any state, from the records: it works across restarts of the plugin.
func (s *Site) FindByGridID(ctx context.Context, gridID string) ([]backends.JobStatus, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	if !gridIDRe().MatchString(gridID) {
		return nil, fmt.Errorf("%w: grid id %q", backends.ErrInvalidSpec, gridID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []backends.JobStatus
	for _, j := range s.byGrid[gridID] {
		if _, ok := s.jobs[backends.JobID(j.rec.ID)]; ok {
			out = append(out, j.status())
		}
	}
	return out, nil
}
