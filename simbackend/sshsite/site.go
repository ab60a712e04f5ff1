package sshsite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/simbackend"
	"golang.org/x/crypto/ssh"
)

// Dialects a site can speak.
const (
	SLURM = "slurm"
	PBS   = "pbs"
)

var (
	// ErrConfig is wrapped by Start for a bad Config (the message names
	// the field).
	ErrConfig = errors.New("sshsite: bad configuration")
)

// Config describes one SSH-served simulated site.
type Config struct {
	Name    string  // site name (also the node name prefix and the PBS server name)
	Dialect string  // SLURM or PBS
	Nodes   int     // nodes (>= 1)
	Cores   int     // cores per node (0 = 1)
	H       float64 // heterogeneity factor (for the broker's config; the site does not use it)
	// Scale is site seconds per wall second (0 = 1, real time): queue
	// waits, walltimes and reservation windows run on the scaled clock;
	// job processes run in real time.
	Scale float64
	// Dir is the site's directory, created 0700 if missing: home/ (the
	// login directory and the SFTP root), bin/ (the batch commands),
	// run/ (the command socket), var/ (the SLURM jobcomp log).
	Dir string
	// Listen is the SSH address (default 127.0.0.1:0).
	Listen string
	// User is the login name accepted and the jobs' owner ("" = the
	// current user).
	User string
	// AuthorizedKeys may log in (at least one).
	AuthorizedKeys []ssh.PublicKey
	// Exe and ExeArgs are how the bin/ commands reach the site: each runs
	// `Exe ExeArgs... <socket> <command> <args...>` (gridsub: its own
	// executable with "simsite", "cmd"), which must call CmdMain.
	Exe     string
	ExeArgs []string
	// MinJobAge is how long (site time) an ended job stays visible to
	// squeue/qstat without -x (default 300 s, SLURM's default).
	MinJobAge time.Duration
	// MaxFileSize bounds one file written over SFTP (default 1 GiB).
	MaxFileSize int64
	// MaxConns bounds the SSH connections served at once (default 512);
	// at most a quarter of them (at least 4) may be still in their
	// handshake. A connection over either bound is closed at once.
	MaxConns int
	// HandshakeTimeout bounds a connection's SSH handshake and
	// authentication (default 20 s); a client that has not logged in by
	// then is disconnected.
	HandshakeTimeout time.Duration
	Logger           *slog.Logger
}

// Stats counts what clients asked of the site.
type Stats struct {
	Conns    int64            // SSH connections accepted
	Sessions int64            // SSH sessions (commands plus SFTP)
	Commands int64            // remote command lines (exec requests)
	SFTP     int64            // SFTP sessions
	Batch    map[string]int64 // batch-system commands run, by name
	Started  int64            // job processes started
}

type counters struct {
	conns, sessions, commands, sftp, started atomic.Int64
	refused                                  atomic.Int64 // connections closed over MaxConns or the handshakes' share
}

// Site is a running SSH-served simulated site.
type Site struct {
	cfg    Config
	home   string
	bin    string
	sock   string
	root   *os.Root
	eng    *simbackend.Engine
	sim    *simbackend.Site
	sshd   *sshd
	cmdLn  net.Listener
	sockFI os.FileInfo // the command socket this site made (Close removes only it)
	hkey   ssh.PublicKey
	log    *slog.Logger
	stats  counters
	stop   context.CancelFunc
	wg     sync.WaitGroup

	evMu  sync.Mutex
	evs   []backends.JobStatus
	evSig chan struct{}

	mu     sync.Mutex
	jobs   map[backends.JobID]*job
	order  []*job
	free   []bool // node i free
	nfree  int
	batch  map[string]int64
	execs  map[string]int // grid id -> job processes started
	resvs  map[string]*resv
	nresv  int
	closed bool
	faults faults // RateLimit and Hang (cmd.go)
}

// Start creates the site's directory, starts its engine on scaled wall
// time, its command socket and its SSH server. Close stops them.
func Start(ctx context.Context, cfg Config) (*Site, error) {
	switch {
	case cfg.Name == "" || strings.ContainsAny(cfg.Name, "/ \t\n[],:"):
		return nil, fmt.Errorf("%w: name %q must be non-empty without '/', blanks, brackets, ',' or ':'", ErrConfig, cfg.Name)
	case cfg.Dialect != SLURM && cfg.Dialect != PBS:
		return nil, fmt.Errorf("%w: dialect %q must be %q or %q", ErrConfig, cfg.Dialect, SLURM, PBS)
	case cfg.Nodes < 1 || cfg.Nodes > 100000:
		return nil, fmt.Errorf("%w: nodes must be 1..100000, got %d", ErrConfig, cfg.Nodes)
	case cfg.Cores < 0:
		return nil, fmt.Errorf("%w: cores must be >= 0, got %d", ErrConfig, cfg.Cores)
	case cfg.Scale < 0:
		return nil, fmt.Errorf("%w: scale must be > 0, got %g", ErrConfig, cfg.Scale)
	case cfg.Dir == "":
		return nil, fmt.Errorf("%w: dir is empty", ErrConfig)
	case len(cfg.AuthorizedKeys) == 0:
		return nil, fmt.Errorf("%w: no authorized keys: nobody could log in", ErrConfig)
	case cfg.Exe == "":
		return nil, fmt.Errorf("%w: exe (the program behind the batch commands) is empty", ErrConfig)
	}
	if cfg.Cores == 0 {
		cfg.Cores = 1
	}
	if cfg.User == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("%w: user is empty and the current user is unknown: %w", ErrConfig, err)
		}
		cfg.User = u.Username
	}
	if cfg.Scale == 0 {
		cfg.Scale = 1
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.MinJobAge <= 0 {
		cfg.MinJobAge = 300 * time.Second
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 512
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 20 * time.Second
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = 1 << 30
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: dir: %w", ErrConfig, err)
	}
	// The socket path must fit sun_path (108 bytes).
	if len(dir)+len("/run/cmd.sock") > 100 {
		return nil, fmt.Errorf("%w: dir %q is too long for a unix socket path below it (max ~85 bytes)", ErrConfig, dir)
	}
	s := &Site{cfg: cfg, home: filepath.Join(dir, "home"), bin: filepath.Join(dir, "bin"),
		sock: filepath.Join(dir, "run", "cmd.sock"), log: cfg.Logger.With("simsite", cfg.Name),
		jobs: map[backends.JobID]*job{}, free: make([]bool, cfg.Nodes), nfree: cfg.Nodes,
		batch: map[string]int64{}, execs: map[string]int{}, resvs: map[string]*resv{}, evSig: make(chan struct{}, 1)}
	for i := range s.free {
		s.free[i] = true
	}
	for _, d := range []string{dir, s.home, s.bin, filepath.Dir(s.sock), filepath.Join(dir, "var")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("sshsite %s: %w", cfg.Name, err)
		}
	}
	if err := s.writeStubs(); err != nil {
		return nil, err
	}
	if s.root, err = os.OpenRoot(s.home); err != nil {
		return nil, fmt.Errorf("sshsite %s: %w", cfg.Name, err)
	}
	if s.cmdLn, s.sockFI, err = listenOwn(s.sock); err != nil {
		s.root.Close()
		return nil, fmt.Errorf("sshsite %s: command socket: %w", cfg.Name, err)
	}
	scfg, hkey, err := newServerConfig(cfg.User, cfg.AuthorizedKeys)
	if err != nil {
		s.cmdLn.Close()
		s.root.Close()
		return nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		s.cmdLn.Close()
		s.root.Close()
		return nil, fmt.Errorf("sshsite %s: listen %s: %w", cfg.Name, cfg.Listen, err)
	}
	s.hkey = hkey
	s.eng = simbackend.NewEngine(time.Now(), 1)
	s.sim, err = simbackend.NewSite(s.eng, simbackend.SiteConfig{Name: cfg.Name, Nodes: cfg.Nodes, CoresPerNode: cfg.Cores,
		H: 1, OnChange: s.enqueue})
	if err != nil {
		ln.Close()
		s.cmdLn.Close()
		s.root.Close()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	rctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.sshd = &sshd{site: s, cfg: scfg, ln: ln, conns: map[net.Conn]bool{}}
	s.sshd.wg.Add(1)
	go s.sshd.serve()
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.eng.Follow(rctx, cfg.Scale, 100*time.Millisecond, nil) }()
	go func() { defer s.wg.Done(); s.events(rctx) }()
	go func() { defer s.wg.Done(); s.serveCmds() }()
	return s, nil
}

// Addr is the SSH server's address (host:port).
func (s *Site) Addr() string { return s.sshd.ln.Addr().String() }

// HostKey is the SSH server's host key (generated at Start).
func (s *Site) HostKey() ssh.PublicKey { return s.hkey }

// KnownHosts is the known_hosts line for the site.
func (s *Site) KnownHosts() string { return KnownHostsLine(s.Addr(), s.hkey) }

// Home is the login directory (absolute).
func (s *Site) Home() string { return s.home }

// Bin is the directory of the batch commands (PBS's bin_dir; first in
// the login PATH).
func (s *Site) Bin() string { return s.bin }

// Config is the site's configuration with defaults applied.
func (s *Site) Config() Config { return s.cfg }

// Now is the site's clock.
func (s *Site) Now() time.Time { return s.eng.Now() }

// Stats counts what clients asked of the site so far.
func (s *Site) Stats() Stats {
	s.mu.Lock()
	b := make(map[string]int64, len(s.batch))
	for k, v := range s.batch {
		b[k] = v
	}
	s.mu.Unlock()
	return Stats{Conns: s.stats.conns.Load(), Sessions: s.stats.sessions.Load(), Commands: s.stats.commands.Load(),
		SFTP: s.stats.sftp.Load(), Batch: b, Started: s.stats.started.Load()}
}

// Executions is how many job processes the site started per grid id (a
// job run twice shows 2).
func (s *Site) Executions() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.execs))
	for k, v := range s.execs {
		m[k] = v
	}
	return m
}

// Close stops the SSH server, the command socket and the engine, and
// kills the running job processes.
func (s *Site) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, j := range s.jobs {
		j.kill()
	}
	s.mu.Unlock()
	s.sshd.close()
	s.cmdLn.Close()
	s.stop()
	s.wg.Wait()
	if fi, err := os.Lstat(s.sock); err == nil && os.SameFile(fi, s.sockFI) {
		os.Remove(s.sock) // ours: never the socket of a site started since in the same Dir
	}
	return s.root.Close()
}

// env is the login environment of remote commands.
func (s *Site) env() []string {
	user := s.cfg.User
	return []string{"PATH=" + s.bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + s.home, "USER=" + user,
		"LOGNAME=" + user, "SHELL=/bin/sh", "LANG=C", "GRIDSUB_SIMSITE=" + s.cfg.Name}
}

// Batch commands of either dialect. Those a site does not serve are
// shadowed in its bin/ by a script that says so and exits 127, so that a
// login shell or job never reaches a real batch client of the machine
// (/usr/bin/sbatch of a SLURM install, say) instead.
var (
	slurmCmds = []string{"sbatch", "squeue", "sinfo", "scancel", "sacct", "scontrol"}
	pbsCmds   = []string{"qsub", "qstat", "qdel", "qselect", "pbsnodes", "pbs_rsub", "pbs_rstat", "pbs_rdel"}
	otherCmds = []string{"srun", "salloc", "sstat", "sprio", "sshare", "sattach", "sbcast", "strigger",
		"qalter", "qhold", "qrls", "qmove", "qrun", "qmsg", "qsig", "qrerun", "tracejob", "pbsdsh", "pbs_release_nodes"}
)

// writeStubs writes one tiny script per batch command into bin/.
func (s *Site) writeStubs() error {
	names, absent := slurmCmds, append(append([]string(nil), pbsCmds...), otherCmds...)
	if s.cfg.Dialect == PBS {
		names, absent = pbsCmds, append(append([]string(nil), slurmCmds...), otherCmds...)
	}
	pre := shq(s.cfg.Exe)
	for _, a := range s.cfg.ExeArgs {
		pre += " " + shq(a)
	}
	write := func(n, body string) error {
		if err := writeFileAtomic(filepath.Join(s.bin, n), []byte(body)); err != nil {
			return fmt.Errorf("sshsite %s: %w", s.cfg.Name, err)
		}
		if err := os.Chmod(filepath.Join(s.bin, n), 0o755); err != nil {
			return fmt.Errorf("sshsite %s: %w", s.cfg.Name, err)
		}
		return nil
	}
	for _, n := range names {
		if err := write(n, "#!/bin/sh\nexec "+pre+" "+shq(s.sock)+" "+n+" \"$@\"\n"); err != nil {
			return err
		}
	}
	for _, n := range absent {
		if err := write(n, "#!/bin/sh\necho '"+n+": not found: not provided by this simulated "+s.cfg.Dialect+" site' >&2\nexit 127\n"); err != nil {
			return err
		}
	}
	return nil
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// job is what a dialect keeps of one job beyond the engine's state.
type job struct {
	id        backends.JobID
	native    string // the id as the dialect prints it
	gridID    string
	name      string
	comment   string            // SLURM --comment
	vars      map[string]string // PBS -v
	queue     string            // partition or queue
	resv      string
	user      string
	dir       string // working directory (absolute)
	script    string // as submitted (absolute)
	body      []byte // the script as read at submission (batch systems copy it)
	out, err  string // absolute
	nodes     int
	cpus      int // per node
	walltime  time.Duration
	submit    time.Time
	nodeIdx   []int
	proc      *os.Process
	started   bool
	ended     bool
	endedWall time.Time
}

func (j *job) kill() {
	if j.proc != nil {
		syscall.Kill(-j.proc.Pid, syscall.SIGKILL)
	}
}

// submit queues j on the engine (s.mu held by the caller, so the start
// event, handled on the event goroutine, finds j registered).
func (s *Site) submitLocked(j *job) error {
	spec := &backends.JobSpec{GridID: j.gridID, Name: j.name, Nodes: j.nodes, CoresPerNode: j.cpus,
		Walltime: j.walltime, Reservation: j.resv, Command: []string{j.script}}
	if spec.GridID == "" {
		spec.GridID = "none"
	}
	// The process decides when the job ends (Finish); a run past the
	// walltime is killed by the engine (StateTimeout).
	spec.Sim.Runtime = j.walltime + time.Nanosecond
	id, err := s.sim.Submit(context.Background(), spec)
	if err != nil {
		return err
	}
	j.id = id
	j.submit = s.eng.Now()
	s.jobs[id] = j
	s.order = append(s.order, j)
	return nil
}

// enqueue is the engine's OnChange: changes are handled in order on the
// event goroutine.
func (s *Site) enqueue(st backends.JobStatus) {
	s.evMu.Lock()
	s.evs = append(s.evs, st)
	s.evMu.Unlock()
	select {
	case s.evSig <- struct{}{}:
	default:
	}
}

func (s *Site) events(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.evSig:
		}
		s.evMu.Lock()
		evs := s.evs
		s.evs = nil
		s.evMu.Unlock()
		for _, st := range evs {
			s.change(st)
		}
	}
}

// change starts a job's process when the engine starts it and kills it
// when the engine ends it (walltime, cancel).
func (s *Site) change(st backends.JobStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[st.ID]
	if j == nil || s.closed {
		return
	}
	switch {
	case st.State == backends.StateRunning && !j.started:
		j.started = true
		s.allocate(j)
		s.startProc(j)
	case st.State.Final() && !j.ended:
		j.ended = true
		j.endedWall = time.Now()
		j.kill()
		s.release(j)
		s.jobEnded(j, st)
	}
}

func (s *Site) allocate(j *job) {
	for i := 0; i < len(s.free) && len(j.nodeIdx) < j.nodes; i++ {
		if s.free[i] {
			s.free[i] = false
			j.nodeIdx = append(j.nodeIdx, i)
		}
	}
	s.nfree -= len(j.nodeIdx)
}

func (s *Site) release(j *job) {
	for _, i := range j.nodeIdx {
		s.free[i] = true
	}
	s.nfree += len(j.nodeIdx)
}

// startProc runs the job's script with bash in its directory, stdout and
// stderr to its files, in its own process group (s.mu held).
func (s *Site) startProc(j *job) {
	s.stats.started.Add(1)
	s.execs[j.gridID]++
	spool := filepath.Join(filepath.Dir(s.sock), "job-"+string(j.id)+".sh")
	if err := os.WriteFile(spool, j.body, 0o700); err != nil {
		s.log.Warn("cannot spool job script", "job", j.id, "err", err)
		go s.sim.Finish(context.Background(), j.id, 127)
		return
	}
	j.body = nil
	cmd := exec.Command("/bin/bash", spool)
	cmd.Dir = j.dir
	cmd.Env = append(s.env(), s.jobEnv(j)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var files []*os.File
	for _, p := range []string{j.out, j.err} {
		f, err := s.openOutput(p)
		if err != nil {
			s.log.Warn("cannot open job output", "job", j.id, "path", p, "err", err)
			f, _ = os.Open(os.DevNull)
		}
		files = append(files, f)
	}
	cmd.Stdout, cmd.Stderr = files[0], files[1]
	err := cmd.Start()
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
	id := j.id
	if err != nil {
		s.log.Warn("cannot start job", "job", id, "err", err)
		go s.sim.Finish(context.Background(), id, 127)
		return
	}
	j.proc = cmd.Process
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else if err != nil {
			code = 127
		}
		os.Remove(spool)
		s.mu.Lock()
		j.proc = nil
		s.mu.Unlock()
		s.sim.Finish(context.Background(), id, code)
	}()
}

// openOutput opens a job's output file for writing through the root (a
// path outside the home, or through a link leaving it, is refused).
func (s *Site) openOutput(p string) (*os.File, error) {
	fsys := &rootFS{home: s.home, root: s.root}
	rel, err := fsys.rel(p)
	if err != nil {
		return nil, err
	}
	return s.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

// nodeName is the name of node i.
func (s *Site) nodeName(i int) string { return fmt.Sprintf("%s-n%d", s.cfg.Name, i+1) }

// nodeList names j's nodes as a batch system does, compressed:
// "site-n[1-3,7]".
func (s *Site) nodeList(j *job) string {
	if len(j.nodeIdx) == 0 {
		return ""
	}
	if len(j.nodeIdx) == 1 {
		return s.nodeName(j.nodeIdx[0])
	}
	var parts []string
	for i := 0; i < len(j.nodeIdx); {
		k := i
		for k+1 < len(j.nodeIdx) && j.nodeIdx[k+1] == j.nodeIdx[k]+1 {
			k++
		}
		if k == i {
			parts = append(parts, fmt.Sprint(j.nodeIdx[i]+1))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", j.nodeIdx[i]+1, j.nodeIdx[k]+1))
		}
		i = k + 1
	}
	return s.cfg.Name + "-n[" + strings.Join(parts, ",") + "]"
}

// status is the engine's view of the given jobs.
func (s *Site) status(ids []backends.JobID) map[backends.JobID]backends.JobStatus {
	sts, _ := s.sim.Status(context.Background(), ids)
	m := make(map[backends.JobID]backends.JobStatus, len(sts))
	for _, st := range sts {
		m[st.ID] = st
	}
	return m
}

// visible reports whether an ended job is still shown by the live
// listings (MinJobAge of site time since it ended).
func (s *Site) visible(st backends.JobStatus, now time.Time) bool {
	return !st.State.Final() || now.Sub(st.End) < s.cfg.MinJobAge
}
