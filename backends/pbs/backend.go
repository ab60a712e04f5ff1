package pbs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Config describes one PBS site as the backend sees it.
type Config struct {
	Name  string // site name (Backend.Name)
	Queue string // queue to submit into; "" = the server's default_queue
	// Account is the account (qsub -A) of a job that names none; "" = none.
	Account string
	// RemoteDir holds the job directories (<RemoteDir>/gridsub/<grid id>).
	// Relative paths are relative to the login directory; "" is the login
	// directory itself. The Stager is rooted here.
	RemoteDir string
	// User is the login user: FindByGridID lists its jobs, and reservations
	// are made for it when a ReservationSpec names no users.
	User string
	// BinDir is the absolute directory of the PBS client commands
	// (DefaultBinDir when ""). They are never called by bare name.
	BinDir string
	// Location is the server's time zone, for its ctime-style times and
	// pbs_rsub -R; nil = time.Local.
	Location *time.Location
	// ResvWait bounds how long CreateReservation waits for the scheduler
	// to confirm a reservation (0 = 30s); an unconfirmed one is then
	// deleted and the request rejected.
	ResvWait time.Duration
	// Now is the clock for reservation start times; nil = time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// BatchSessions is how many batches of one SubmitBatch run at once,
	// each in its own SSH session (0 means DefaultBatchSessions).
	BatchSessions int
}

// DefaultBatchSessions is as for SLURM (slurm.DefaultBatchSessions): half
// the transport's default session slots.
const DefaultBatchSessions = 4

// Backend drives one PBS server through a Runner and a Stager.
type Backend struct {
	cfg   Config
	cmds  Cmds
	run   backends.Runner
	stage backends.Stager // rooted at cfg.RemoteDir; nil = no staging
	log   *slog.Logger
	// link is the connection made by Connect (the zero Link for a
	// Backend built with New).
	link sshbatch.Link

	mu    sync.Mutex
	dirs  map[backends.JobID]string // job id -> job directory (as the login shell sees it)
	nodes int                       // vnodes the site has (0 = not asked yet)
	cpn   int                       // CPUs per vnode
	mem   int64                     // memory per vnode, bytes (0 = not known)
	gpus  int                       // GPUs per vnode
}

var (
	_ backends.Backend  = (*Backend)(nil)
	_ backends.Finder   = (*Backend)(nil)
	_ backends.Fetcher  = (*Backend)(nil)
	_ backends.Reserver = (*Backend)(nil)
)

// New builds the backend. run executes commands at the login node; stage,
// if not nil, is called once with cfg.RemoteDir and must return a Stager
// confined to it (without it, inputs and FetchOutputs are unsupported).
func New(cfg Config, run backends.Runner, stage func(root string) backends.Stager) *Backend {
	if cfg.RemoteDir == "~" {
		cfg.RemoteDir = ""
	} else if rest, ok := strings.CutPrefix(cfg.RemoteDir, "~/"); ok {
		cfg.RemoteDir = rest
	}
	if cfg.BinDir == "" {
		cfg.BinDir = DefaultBinDir
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.ResvWait <= 0 {
		cfg.ResvWait = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Backend{cfg: cfg, cmds: Cmds{Bin: cfg.BinDir}, run: run, dirs: map[backends.JobID]string{},
		log: cfg.Logger.With("site", cfg.Name, "backend", "pbs")}
	if stage != nil {
		b.stage = stage(cfg.RemoteDir)
	}
	return b
}

// Name is the site name.
func (b *Backend) Name() string { return b.cfg.Name }

func (b *Backend) exec(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	if err := ctx.Err(); err != nil {
		return backends.Result{}, fmt.Errorf("%s: %w", b.cfg.Name, err)
	}
	r, err := b.run.Run(ctx, argv, stdin)
	if err != nil {
		return r, fmt.Errorf("%s: running %s: %w", b.cfg.Name, cmdName(argv), err)
	}
	return r, nil
}

// cmdName names the PBS command an argv runs: the program's base name, or
// for the bash scripts of this package the PBS command they run.
func cmdName(argv []string) string {
	if len(argv) == 0 {
		return "?"
	}
	if len(argv) == 4 && argv[3] == sshbatch.Program {
		return "qsub (batch)"
	}
	if argv[0] == "bash" && len(argv) > 3 {
		switch argv[3] {
		case "gridsub-submit":
			return "qsub"
		case "gridsub-status":
			return "qstat"
		case "gridsub-find":
			return "qstat"
		case "gridsub-ids":
			return "job id files"
		}
	}
	return path.Base(argv[0])
}

var unavailableRe = regexp.MustCompile(`(?i)cannot connect to server|connection refused|communication failure|pbs_iff|timed out|temporarily unavailable|try again|server is down`)

// commandErr turns a non-zero exit into an error: ErrUnavailable when the
// server could not be reached, ErrRejected otherwise, with PBS's words.
func (b *Backend) commandErr(argv []string, r backends.Result) error {
	msg := Message(r)
	kind := backends.ErrRejected
	if unavailableRe.MatchString(msg) || r.ExitCode == 255 && msg == "" {
		kind = backends.ErrUnavailable
	}
	return fmt.Errorf("%w: %s on %s exited %d: %s", kind, cmdName(argv), b.cfg.Name, r.ExitCode, msg)
}

func (b *Backend) remoteDir() string {
	if b.cfg.RemoteDir == "" {
		return "."
	}
	return b.cfg.RemoteDir
}

// nodesInfo reads the vnodes (pbsnodes -a -F json) and caches the site's
// size for Submit and CreateReservation.
func (b *Backend) nodesInfo(ctx context.Context) ([]Node, error) {
	argv := b.cmds.NodesArgv()
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	nodes, err := ParsePbsnodes(r.Stdout)
	if err != nil {
		return nil, err
	}
	n, cpn, mem, gpus := 0, 0, int64(0), 0
	for _, x := range nodes {
		if x.Usable() {
			n++
			cpn, mem, gpus = max(cpn, x.NCPUs), max(mem, x.MemBytes), max(gpus, x.NGPUs)
		}
	}
	b.mu.Lock()
	b.nodes, b.cpn, b.mem, b.gpus = n, cpn, mem, gpus
	b.mu.Unlock()
	return nodes, nil
}

// shape returns the cached node count and CPUs per node, asking once.
func (b *Backend) shape(ctx context.Context) (int, int, error) {
	b.mu.Lock()
	n, cpn := b.nodes, b.cpn
	b.mu.Unlock()
	if n > 0 {
		return n, cpn, nil
	}
	if _, err := b.nodesInfo(ctx); err != nil {
		return 0, 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nodes, b.cpn, nil
}

// Info reports the usable vnodes, idle ones, CPUs per vnode, the queues
// (the configured or default one first; reservation queues left out) and
// the live jobs of that queue with their estimated ends: four commands
// (pbsnodes, qstat -B, qstat -Q, qstat -f without ids).
func (b *Backend) Info(ctx context.Context) (*backends.SiteInfo, error) {
	nodes, err := b.nodesInfo(ctx)
	if err != nil {
		return nil, err
	}
	info := &backends.SiteInfo{Name: b.cfg.Name, Kind: "pbs"}
	for _, n := range nodes {
		if !n.Usable() {
			continue
		}
		info.Nodes++
		if n.Idle() {
			info.FreeNodes++
		}
		info.CoresPerNode = max(info.CoresPerNode, n.NCPUs)
		info.MemPerNode = max(info.MemPerNode, n.MemBytes)
		info.GPUsPerNode = max(info.GPUsPerNode, n.NGPUs)
	}
	queue := b.cfg.Queue
	if queue == "" {
		argv := b.cmds.ServerArgv()
		r, err := b.exec(ctx, argv, nil)
		if err != nil {
			return nil, err
		}
		if r.ExitCode != 0 {
			return nil, b.commandErr(argv, r)
		}
		srv, err := ParseServer(r.Stdout)
		if err != nil {
			return nil, err
		}
		queue = srv.DefaultQueue
	}
	argv := b.cmds.QueuesArgv()
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	qs, err := ParseQueues(r.Stdout)
	if err != nil {
		return nil, err
	}
	var names []string
	found := false
	for _, q := range qs {
		if q.IsResv {
			continue
		}
		if q.Name == queue {
			found = true
			continue
		}
		names = append(names, q.Name)
	}
	if !found {
		return nil, fmt.Errorf("%w: queue %q does not exist on %s (have %s)", backends.ErrRejected, queue, b.cfg.Name, strings.Join(names, ", "))
	}
	info.Partitions = append([]string{queue}, names...)
	argv = b.cmds.ActiveJSONArgv()
	r, err = b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	jobs, err := ParseJobsJSON(r.Stdout)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if j.Attrs["queue"] != queue {
			continue
		}
		st, err := j.Status(b.cfg.Location)
		if err != nil {
			return nil, err
		}
		switch st.State {
		case backends.StatePending:
			info.Queued++
		case backends.StateRunning:
			info.Running++
			n, _ := strconv.Atoi(j.Attrs["Resource_List.nodect"])
			until := st.Start.Add(ParseDuration(j.Attrs["Resource_List.walltime"]))
			info.Busy = append(info.Busy, backends.Allocation{Nodes: max(n, 1), Until: until})
		}
	}
	sort.Slice(info.Busy, func(i, k int) bool { return info.Busy[i].Until.Before(info.Busy[k].Until) })
	return info, nil
}

// ParseDuration reads PBS's [[HH:]MM:]SS (0 when unreadable).
func ParseDuration(s string) time.Duration {
	var d time.Duration
	for _, p := range strings.Split(strings.TrimSpace(s), ":") {
		v, err := strconv.Atoi(p)
		if err != nil {
			return 0
		}
		d = d*60 + time.Duration(v)
	}
	return d * time.Second
}

// Submit checks the spec against the site's size, creates the job
// directory, stages the inputs, writes the wrapper and runs qsub there:
// one SFTP write per input plus one remote command (and one pbsnodes the
// first time, to learn the site's size).
func (b *Backend) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	full, cpn, err := b.prepare(ctx, spec)
	if err != nil {
		return "", err
	}
	argv := b.cmds.SubmitArgv(full, b.qsubArgs(spec, cpn))
	r, err := b.exec(ctx, argv, strings.NewReader(Wrapper(spec)))
	if err != nil {
		return "", sshbatch.SentErr(err)
	}
	return b.accepted(spec, full, argv, r)
}

// prepare checks spec against the site and stages its inputs; it returns
// the job directory as the login shell sees it, and the site's CPUs per
// node.
func (b *Backend) prepare(ctx context.Context, spec *backends.JobSpec) (string, int, error) {
	if err := checkSpec(spec); err != nil {
		return "", 0, err
	}
	if strings.ContainsAny(b.cfg.RemoteDir, ":,| \t\n\\\"'") {
		// -o/-e take [host:]path, Variable_List (PBS_O_WORKDIR) is comma
		// separated and DSV is '|' separated.
		return "", 0, fmt.Errorf("%w: %s: remote directory %q must not contain ':', ',', '|', quotes, backslashes or white space (PBS reads them in its own formats)",
			backends.ErrInvalidSpec, b.cfg.Name, b.cfg.RemoteDir)
	}
	nodes, cpn, err := b.shape(ctx)
	if err != nil {
		return "", 0, err
	}
	if spec.Nodes > nodes {
		// qsub accepts it and the job waits forever ("Can Never Run").
		return "", 0, fmt.Errorf("%w: %d nodes asked, %s has %d usable", backends.ErrRejected, spec.Nodes, b.cfg.Name, nodes)
	}
	if spec.CoresPerNode > cpn && cpn > 0 {
		return "", 0, fmt.Errorf("%w: %d cores per node asked, %s's nodes have %d", backends.ErrRejected, spec.CoresPerNode, b.cfg.Name, cpn)
	}
	b.mu.Lock()
	mem, gpus := b.mem, b.gpus
	b.mu.Unlock()
	// Like a too wide job, these would wait for ever ("Can Never Run").
	if spec.MemPerNode > mem && mem > 0 {
		return "", 0, fmt.Errorf("%w: %d bytes of memory per node asked, %s's nodes have %d", backends.ErrRejected, spec.MemPerNode, b.cfg.Name, mem)
	}
	if spec.GPUsPerNode > gpus {
		return "", 0, fmt.Errorf("%w: %d GPUs per node asked, %s's nodes have %d", backends.ErrRejected, spec.GPUsPerNode, b.cfg.Name, gpus)
	}
	dir := JobDir(spec)
	if len(spec.Inputs) > 0 {
		if b.stage == nil {
			return "", 0, fmt.Errorf("%w: %s has no stager, cannot stage %d input(s)", backends.ErrUnsupported, b.cfg.Name, len(spec.Inputs))
		}
		for _, in := range spec.Inputs {
			if err := b.put(ctx, dir, in); err != nil {
				return "", 0, err
			}
		}
	}
	return path.Join(b.remoteDir(), dir), cpn, nil
}

// accepted reads qsub's result for spec (run by argv in the directory
// full) and records the job's directory.
func (b *Backend) accepted(spec *backends.JobSpec, full string, argv []string, r backends.Result) (backends.JobID, error) {
	if r.ExitCode != 0 {
		return "", b.commandErr(argv, r)
	}
	id, err := ParseQsub(r.Stdout)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.dirs[id] = full
	b.mu.Unlock()
	b.log.Debug("submitted", "grid_id", spec.GridID, "job", id, "dir", full)
	return id, nil
}

func (b *Backend) put(ctx context.Context, dir string, in backends.StageFile) error {
	rel, err := relPath("input", in.Remote)
	if err != nil {
		return err
	}
	f, err := os.Open(in.Local)
	if err != nil {
		return fmt.Errorf("%w: input %s: %w", backends.ErrInvalidSpec, in.Local, err)
	}
	defer f.Close()
	mode := in.Mode
	if mode == 0 {
		mode = 0o644
	}
	if _, err := b.stage.Put(ctx, f, path.Join(dir, rel), mode); err != nil {
		return fmt.Errorf("%s: staging %s: %w", b.cfg.Name, in.Remote, err)
	}
	return nil
}

// MaxIDsPerCommand bounds the job ids put into one qstat/grep argv.
const MaxIDsPerCommand = 2000

// Status answers for all ids with one `qstat -x -f -F dsv <ids>` (one per
// MaxIDsPerCommand ids); ids PBS does not know (history off or expired)
// are looked up in one read of their exit-code files, and are StateLost
// when no record is left.
func (b *Backend) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	found := make(map[backends.JobID]backends.JobStatus, len(ids))
	var query []backends.JobID
	seen := map[backends.JobID]bool{}
	for _, id := range ids {
		if validJobID(string(id)) && !seen[id] {
			seen[id] = true
			query = append(query, id)
		}
	}
	for lo := 0; lo < len(query); lo += MaxIDsPerCommand {
		chunk := query[lo:min(lo+MaxIDsPerCommand, len(query))]
		argv := b.cmds.StatusArgv(chunk)
		r, err := b.exec(ctx, argv, nil)
		if err != nil {
			return nil, err
		}
		// 153: some id is unknown (named on stderr); the others are printed.
		if r.ExitCode != 0 && !(r.ExitCode == 153 && len(UnknownJobIDs(r.Stderr)) > 0) {
			return nil, b.commandErr(argv, r)
		}
		recs, err := ParseDSV(r.Stdout)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if !seen[rec.ID] {
				continue // another job of the id-less listing
			}
			st, err := rec.Status(b.cfg.Location)
			if err != nil {
				return nil, err
			}
			found[rec.ID] = st
		}
	}
	var missing []backends.JobID
	for _, id := range query {
		if _, ok := found[id]; !ok {
			missing = append(missing, id)
		}
	}
	for lo := 0; lo < len(missing); lo += MaxIDsPerCommand {
		if err := b.fromExitFiles(ctx, missing[lo:min(lo+MaxIDsPerCommand, len(missing))], found); err != nil {
			return nil, err
		}
	}
	out := make([]backends.JobStatus, len(ids))
	for i, id := range ids {
		st, ok := found[id]
		if !ok {
			st = backends.JobStatus{ID: id, State: backends.StateLost, ExitCode: -1,
				Reason: "no record at the site (qstat -x, exit-code file)"}
		}
		out[i] = st
	}
	return out, nil
}

func (b *Backend) fromExitFiles(ctx context.Context, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	byPath := map[string]backends.JobID{}
	var paths []string
	b.mu.Lock()
	for _, id := range ids {
		if d, ok := b.dirs[id]; ok {
			p := path.Join(d, ExitFile)
			byPath[p] = id
			paths = append(paths, p)
		}
	}
	b.mu.Unlock()
	if len(paths) == 0 {
		return nil
	}
	r, err := b.exec(ctx, ExitFilesArgv(paths), nil)
	if err != nil {
		return err
	}
	for p, code := range ParseExitFiles(r.Stdout) {
		id, ok := byPath[p]
		if !ok {
			continue
		}
		st := backends.StateCompleted
		if code != 0 {
			st = backends.StateFailed
		}
		found[id] = backends.JobStatus{ID: id, State: st, ExitCode: code,
			Reason: "from the exit-code file (PBS keeps no history of the job)"}
	}
	return nil
}

// ParseExitFiles reads `grep -H -s "" <files>`: path -> exit code.
func ParseExitFiles(out []byte) map[string]int {
	m := map[string]int{}
	for _, l := range lines(out) {
		i := strings.LastIndexByte(l, ':')
		if i < 0 {
			continue
		}
		if c, err := strconv.Atoi(strings.TrimSpace(l[i+1:])); err == nil {
			m[l[:i]] = c
		}
	}
	return m
}

// Cancel deletes one job; a job that has already ended (or that the
// server no longer knows) is not an error.
func (b *Backend) Cancel(ctx context.Context, id backends.JobID) error {
	if !validJobID(string(id)) {
		return fmt.Errorf("%w: %q is not a PBS job id (<seq>.<server>)", backends.ErrUnknownJob, id)
	}
	argv := b.cmds.QdelArgv(id)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		msg := Message(r)
		if strings.Contains(msg, "Job has finished") || strings.Contains(msg, "Unknown Job Id") {
			return nil
		}
		return b.commandErr(argv, r)
	}
	return nil
}

// qsubArgs are spec's qsub options at this site: the site's queue, and its
// account when the job names none.
func (b *Backend) qsubArgs(spec *backends.JobSpec, cpn int) []string {
	sp := *spec
	if sp.Account == "" {
		sp.Account = b.cfg.Account
	}
	return QsubArgs(&sp, b.cfg.Queue, cpn)
}
