package slurm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Config describes one SLURM site as the backend sees it.
type Config struct {
	Name      string // site name (Backend.Name)
	Partition string // partition to submit into; "" = the cluster's default
	Account   string // account to charge when the job names none; "" = the user's default
	// RemoteDir holds the job directories (<RemoteDir>/gridsub/<grid id>).
	// Relative paths are relative to the login directory; "" is the login
	// directory itself. The Stager is rooted here.
	RemoteDir string
	// User is the login user; reservations are made for it when a
	// ReservationSpec names no users.
	User string
	// JobCompFile is the jobcomp/filetxt log; "" = read JobCompLoc from
	// `scontrol show config` on first need; "-" = do not use one.
	JobCompFile string
	// Location is the controller's time zone, for the ISO times of the
	// jobcomp log; nil = time.Local.
	Location *time.Location
	// Now is the clock for reservation start times and sacct bounds; nil =
	// time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// MaxJobBytes bounds the bytes staged in for one job, and those
	// fetched back, each way (staging.max_job_bytes); 0 means
	// DefaultMaxJobBytes (50 GiB).
	MaxJobBytes int64
	// MaxFileSize is the Stager's per-file limit (staging.max_file_size),
	// for messages; 0 means transport.DefaultMaxFileSize.
	MaxFileSize int64
	// BatchSessions is how many batches of one SubmitBatch run at once,
	// each in its own SSH session (0 means DefaultBatchSessions).
	BatchSessions int
}

// DefaultBatchSessions: sbatch mostly waits for slurmctld, so when a
// cycle's jobs for the site fill several batches (over ~100 jobs), the
// batches run in parallel sessions (measured on the testbed, 500 jobs:
// 1 session 132 jobs/s, 2: 205, 4: 354; docs/performance.md). Four is half
// the transport's default session slots, leaving room for polls.
const DefaultBatchSessions = 4

// Backend drives one SLURM cluster through a Runner and a Stager.
type Backend struct {
	cfg   Config
	run   backends.Runner
	stage backends.Stager // rooted at cfg.RemoteDir; nil = no staging
	log   *slog.Logger
	// link is the connection made by Connect (the zero Link for a
	// Backend built with New).
	link sshbatch.Link

	mu       sync.Mutex
	dirs     map[backends.JobID]string // job id -> job directory relative to RemoteDir
	jobcomp  string                    // resolved jobcomp file ("-" = none)
	noSacct  bool                      // sacct said accounting is disabled
	sacctErr string
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
	// The remote shell never sees RemoteDir unquoted, so "~" is not
	// expanded there: a leading "~/" means the login directory, which is
	// where relative paths start anyway.
	if cfg.RemoteDir == "~" {
		cfg.RemoteDir = ""
	} else if rest, ok := strings.CutPrefix(cfg.RemoteDir, "~/"); ok {
		cfg.RemoteDir = rest
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Backend{cfg: cfg, run: run, log: cfg.Logger.With("site", cfg.Name, "backend", "slurm"),
		dirs: map[backends.JobID]string{}, jobcomp: cfg.JobCompFile}
	if stage != nil {
		b.stage = stage(cfg.RemoteDir)
	}
	return b
}

// Name is the site name.
func (b *Backend) Name() string { return b.cfg.Name }

// exec runs argv and returns its result; a Runner failure is wrapped with
// the command's name.
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

func cmdName(argv []string) string {
	for i, a := range argv {
		switch a {
		case "squeue", "sbatch", "scontrol", "sinfo", "scancel", "sacct", "grep":
			return a
		case sshbatch.Program:
			return "sbatch (batch)"
		case "bash":
			if i+3 < len(argv) && argv[i+3] == "gridsub-submit" {
				return "sbatch"
			}
		}
	}
	if len(argv) > 0 {
		return argv[0]
	}
	return "?"
}

var unavailableRe = regexp.MustCompile(`(?i)unable to contact|socket timed out|connection refused|slurm_receive_msg|zero bytes were transmitted|communications connection failure|try again|temporarily unavailable|resource temporarily`)

// commandErr turns a non-zero exit into an error: ErrUnavailable when the
// controller could not be reached, ErrRejected otherwise, with SLURM's words.
func (b *Backend) commandErr(argv []string, r backends.Result) error {
	msg := Message(r)
	kind := backends.ErrRejected
	if unavailableRe.MatchString(msg) || r.ExitCode == 255 && msg == "" {
		kind = backends.ErrUnavailable
	}
	return fmt.Errorf("%w: %s on %s exited %d: %s", kind, cmdName(argv), b.cfg.Name, r.ExitCode, msg)
}

// Info reports nodes, idle nodes, cores per node and partitions of the
// configured partition (or the default one), and the live jobs' node
// blocks with their end times: two commands, sinfo and squeue.
func (b *Backend) Info(ctx context.Context) (*backends.SiteInfo, error) {
	argv := SinfoArgv()
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	recs, err := ParseSinfo(r.Stdout)
	if err != nil {
		return nil, err
	}
	info := &backends.SiteInfo{Name: b.cfg.Name, Kind: "slurm"}
	part := b.cfg.Partition
	var def string
	seenPart := map[string]bool{}
	var parts []string
	for _, n := range recs {
		if n.Default && def == "" {
			def = n.Partition
		}
		if !seenPart[n.Partition] {
			seenPart[n.Partition] = true
			parts = append(parts, n.Partition)
		}
	}
	if part == "" {
		part = def
	}
	if !seenPart[part] {
		return nil, fmt.Errorf("%w: partition %q does not exist on %s (have %s)", backends.ErrRejected, part, b.cfg.Name, strings.Join(parts, ", "))
	}
	info.Partitions = append(info.Partitions, part)
	for _, p := range parts {
		if p != part {
			info.Partitions = append(info.Partitions, p)
		}
	}
	seenNode := map[string]bool{}
	for _, n := range recs {
		if n.Partition != part || seenNode[n.Node] {
			continue
		}
		seenNode[n.Node] = true
		if !NodeUsable(n.State) {
			continue
		}
		info.Nodes++
		if NodeIdle(n.State) {
			info.FreeNodes++
		}
		info.CoresPerNode = max(info.CoresPerNode, n.CPUs)
		info.MemPerNode = max(info.MemPerNode, n.MemMiB<<20)
		info.GPUsPerNode = max(info.GPUsPerNode, n.GPUs)
	}
	argv = SqueueActiveArgv()
	r, err = b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	jobs, err := ParseSqueue(r.Stdout)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if j.Partition != part && !strings.Contains(","+j.Partition+",", ","+part+",") {
			continue
		}
		switch j.Status.State {
		case backends.StatePending:
			info.Queued++
		case backends.StateRunning:
			info.Running++
			info.Busy = append(info.Busy, backends.Allocation{Nodes: j.Nodes, Until: j.Status.End})
		}
	}
	sort.Slice(info.Busy, func(i, k int) bool { return info.Busy[i].Until.Before(info.Busy[k].Until) })
	return info, nil
}

// Submit creates the job directory, stages the inputs, writes the wrapper
// and runs sbatch there: one SFTP write per input plus one remote command.
func (b *Backend) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	dir, err := b.prepare(ctx, spec)
	if err != nil {
		return "", err
	}
	argv := SubmitArgv(path.Join(b.remoteDir(), dir), b.sbatchArgs(spec))
	r, err := b.exec(ctx, argv, strings.NewReader(Wrapper(spec)))
	if err != nil {
		return "", sshbatch.SentErr(err)
	}
	return b.accepted(spec, dir, argv, r)
}

// prepare checks spec and stages its inputs; it returns the job directory
// (relative to RemoteDir).
func (b *Backend) prepare(ctx context.Context, spec *backends.JobSpec) (string, error) {
	if err := checkSpec(spec); err != nil {
		return "", err
	}
	dir := JobDir(spec)
	if len(spec.Inputs) > 0 {
		if b.stage == nil {
			return "", fmt.Errorf("%w: %s has no stager, cannot stage %d input(s)", backends.ErrUnsupported, b.cfg.Name, len(spec.Inputs))
		}
		budget := b.maxJobBytes()
		for _, in := range spec.Inputs {
			n, err := b.put(ctx, dir, in, budget)
			if err != nil {
				return "", err
			}
			budget -= n
		}
	}
	return dir, nil
}

// accepted reads sbatch's result for spec (run by argv in dir) and records
// the job's directory.
func (b *Backend) accepted(spec *backends.JobSpec, dir string, argv []string, r backends.Result) (backends.JobID, error) {
	if r.ExitCode != 0 {
		return "", b.commandErr(argv, r)
	}
	id, _, err := ParseSbatch(r.Stdout)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.dirs[id] = dir
	b.mu.Unlock()
	b.log.Debug("submitted", "grid_id", spec.GridID, "job", id, "dir", dir)
	return id, nil
}

func (b *Backend) remoteDir() string {
	if b.cfg.RemoteDir == "" {
		return "."
	}
	return b.cfg.RemoteDir
}

// MaxIDsPerCommand bounds the job ids put into one squeue/grep/sacct argv.
const MaxIDsPerCommand = 5000

// Status answers for all ids with one squeue; ids squeue has forgotten are
// looked up in the jobcomp log (one grep), sacct (one call, skipped once
// the site said accounting is disabled) and the exit-code files (one grep),
// in that order, and are StateLost when no record is left.
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
	// One squeue per MaxIDsPerCommand ids (one in practice: the argv stays
	// far below the kernel's 128 KiB limit per word).
	for lo := 0; lo < len(query); lo += MaxIDsPerCommand {
		chunk := query[lo:min(lo+MaxIDsPerCommand, len(query))]
		argv := SqueueArgv(chunk)
		r, err := b.exec(ctx, argv, nil)
		if err != nil {
			return nil, err
		}
		switch {
		case r.ExitCode == 0:
			recs, err := ParseSqueue(r.Stdout)
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				found[rec.Status.ID] = rec.Status
			}
		case strings.Contains(Message(r), "Invalid job id specified"):
			// every id of the chunk is unknown to the controller
		default:
			return nil, b.commandErr(argv, r)
		}
	}
	missing := func() []backends.JobID {
		var m []backends.JobID
		for _, id := range query {
			if _, ok := found[id]; !ok {
				m = append(m, id)
			}
		}
		return m
	}
	for _, from := range []func(context.Context, []backends.JobID, map[backends.JobID]backends.JobStatus) error{
		b.fromJobComp, b.fromSacct, b.fromExitFiles} {
		m := missing()
		for lo := 0; lo < len(m); lo += MaxIDsPerCommand {
			if err := from(ctx, m[lo:min(lo+MaxIDsPerCommand, len(m))], found); err != nil {
				return nil, err
			}
		}
	}
	out := make([]backends.JobStatus, len(ids))
	for i, id := range ids {
		st, ok := found[id]
		if !ok {
			st = backends.JobStatus{ID: id, State: backends.StateLost, ExitCode: -1,
				Reason: "no record at the site (squeue, jobcomp log, sacct, exit-code file)"}
		}
		out[i] = st
	}
	return out, nil
}

// jobCompFile resolves the jobcomp log once ("" when the site has none).
func (b *Backend) jobCompFile(ctx context.Context) (string, error) {
	b.mu.Lock()
	f := b.jobcomp
	b.mu.Unlock()
	if f != "" {
		if f == "-" {
			return "", nil
		}
		return f, nil
	}
	argv := ConfigArgv()
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return "", err
	}
	if r.ExitCode != 0 {
		return "", b.commandErr(argv, r)
	}
	typ, _ := configValue(r.Stdout, "JobCompType")
	loc, _ := configValue(r.Stdout, "JobCompLoc")
	f = "-"
	if typ == "jobcomp/filetxt" && strings.HasPrefix(loc, "/") {
		f = loc
	}
	b.mu.Lock()
	b.jobcomp = f
	b.mu.Unlock()
	if f == "-" {
		return "", nil
	}
	return f, nil
}

func (b *Backend) fromJobComp(ctx context.Context, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	file, err := b.jobCompFile(ctx)
	if err != nil || file == "" {
		return err
	}
	argv := JobCompArgv(file, ids)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode > 1 { // 1 = no line matched
		b.log.Warn("cannot read the jobcomp log", "file", file, "err", Message(r))
		return nil
	}
	recs, err := ParseJobComp(r.Stdout, b.cfg.Location)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		st := rec.Status
		st.Reason = "from the jobcomp log"
		found[st.ID] = st // later lines win
	}
	return nil
}

// dirBelongs reports whether a job directory (absolute or relative) is one
// of gridID's: .../gridsub/<gridID> or .../gridsub/<gridID>-<k>.
func dirBelongs(dir, gridID string) bool {
	i := strings.LastIndex(dir, "/gridsub/")
	if i < 0 {
		if !strings.HasPrefix(dir, "gridsub/") {
			return false
		}
		i = -1
	}
	base := dir[i+len("/gridsub/"):]
	if base == gridID {
		return true
	}
	k, ok := strings.CutPrefix(base, gridID+"-")
	return ok && k != "" && strings.Trim(k, "0123456789") == ""
}

func (b *Backend) fromSacct(ctx context.Context, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	b.mu.Lock()
	skip := b.noSacct
	b.mu.Unlock()
	if skip {
		return nil
	}
	argv := SacctArgv(ids, b.cfg.Now().Add(-30*24*time.Hour))
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		msg := Message(r)
		b.mu.Lock()
		b.noSacct, b.sacctErr = true, msg
		b.mu.Unlock()
		b.log.Info("sacct unavailable at this site; relying on the jobcomp log and exit-code files", "err", msg)
		return nil
	}
	for _, l := range lines(r.Stdout) {
		f := strings.Split(l, "|")
		if len(f) != 5 || !validJobID(f[0]) {
			return badOutput("sacct", r.Stdout, fmt.Sprintf("line %q is not JobIDRaw|State|ExitCode|Start|End", l))
		}
		st := MapState(f[1])
		if st == backends.StateUnknown {
			return badOutput("sacct", r.Stdout, fmt.Sprintf("unknown state %q", f[1]))
		}
		js := backends.JobStatus{ID: backends.JobID(f[0]), State: st, ExitCode: -1, Reason: "from sacct",
			Start: epoch(f[3]), End: epoch(f[4])}
		if c, s, ok := parseExit(f[2]); ok && st.Final() {
			js.ExitCode, js.Signal = c, s
		}
		found[js.ID] = js
	}
	return nil
}

func (b *Backend) fromExitFiles(ctx context.Context, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	byPath := map[string]backends.JobID{}
	var paths []string
	b.mu.Lock()
	for _, id := range ids {
		if d, ok := b.dirs[id]; ok {
			p := path.Join(b.remoteDir(), d, ExitFile)
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
			Reason: "from the exit-code file (SLURM has no record left)"}
	}
	return nil
}

// Cancel cancels one job; a job that has already ended (or that the
// controller no longer knows) is not an error.
func (b *Backend) Cancel(ctx context.Context, id backends.JobID) error {
	if !validJobID(string(id)) {
		return fmt.Errorf("%w: %q is not a SLURM job id", backends.ErrUnknownJob, id)
	}
	argv := ScancelArgv(id)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		msg := Message(r)
		if strings.Contains(msg, "Invalid job id") || strings.Contains(msg, "already completing or completed") {
			return nil
		}
		return b.commandErr(argv, r)
	}
	return nil
}

// FindByGridID lists every job tagged with gridID: the login user's jobs
// squeue still knows (tag in --comment), plus finished ones in the jobcomp
// log whose working directory is one of the grid job's directories.
func (b *Backend) FindByGridID(ctx context.Context, gridID string) ([]backends.JobStatus, error) {
	if !sshbatch.ValidGridID(gridID) {
		return nil, fmt.Errorf("%w: grid id %q", backends.ErrInvalidSpec, gridID)
	}
	argv := SqueueMineArgv()
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	recs, err := ParseSqueue(r.Stdout)
	if err != nil {
		return nil, err
	}
	var out []backends.JobStatus
	seen := map[backends.JobID]bool{}
	for _, rec := range recs {
		if rec.Comment == GridTag(gridID) {
			out = append(out, rec.Status)
			seen[rec.Status.ID] = true
		}
	}
	file, err := b.jobCompFile(ctx)
	if err != nil {
		return nil, err
	}
	if file != "" {
		argv = JobCompGridArgv(file, gridID)
		r, err = b.exec(ctx, argv, nil)
		if err != nil {
			return nil, err
		}
		if r.ExitCode <= 1 {
			comp, err := ParseJobComp(r.Stdout, b.cfg.Location)
			if err != nil {
				return nil, err
			}
			for _, c := range comp {
				if !dirBelongs(c.WorkDir, gridID) || seen[c.Status.ID] {
					continue
				}
				// Only this backend's own job directories: another broker
				// (or an earlier one) with other RemoteDir may have used the
				// same tag. A relative RemoteDir cannot be compared with the
				// absolute WorkDir of the log; such a site is trusted as before.
				if _, mine := b.relDir(c.WorkDir); !mine && path.IsAbs(b.cfg.RemoteDir) {
					continue
				}
				c.Status.GridID = gridID
				out = append(out, c.Status)
				seen[c.Status.ID] = true
				b.mu.Lock()
				if rel, ok := b.relDir(c.WorkDir); ok {
					b.dirs[c.Status.ID] = rel
				}
				b.mu.Unlock()
			}
		}
	}
	return out, nil
}

// relDir maps an absolute job directory back to one relative to RemoteDir
// when it lies under it (only possible when RemoteDir is absolute).
func (b *Backend) relDir(abs string) (string, bool) {
	i := strings.LastIndex(abs, "/gridsub/")
	if i < 0 || !path.IsAbs(b.cfg.RemoteDir) || path.Clean(abs[:i]) != path.Clean(b.cfg.RemoteDir) {
		return "", false
	}
	return abs[i+1:], true
}

// CreateReservation makes a native reservation. SLURM silently clamps
// NodeCnt to the nodes that are free in the window, so the result is
// checked: a smaller reservation is deleted again and the request rejected.
func (b *Backend) CreateReservation(ctx context.Context, rs *backends.ReservationSpec) (backends.ResvID, error) {
	spec := *rs
	switch {
	case !resvNameRe.MatchString(spec.Name):
		return "", fmt.Errorf("%w: reservation name %q must be 1-64 letters, digits, '.', '_' or '-'", backends.ErrInvalidSpec, spec.Name)
	case spec.Nodes < 1:
		return "", fmt.Errorf("%w: reservation needs >= 1 node, got %d", backends.ErrInvalidSpec, spec.Nodes)
	case spec.Duration <= 0:
		return "", fmt.Errorf("%w: reservation duration must be > 0, got %s", backends.ErrInvalidSpec, spec.Duration)
	}
	if len(spec.Users) == 0 {
		if b.cfg.User == "" {
			return "", fmt.Errorf("%w: reservation names no users and the backend has no login user configured", backends.ErrInvalidSpec)
		}
		spec.Users = []string{b.cfg.User}
	}
	argv := CreateReservationArgv(&spec, b.cfg.Now(), b.cfg.Partition)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return "", err
	}
	if r.ExitCode != 0 {
		return "", b.commandErr(argv, r)
	}
	id, err := ParseReservationCreated(r.Stdout)
	if err != nil {
		return "", err
	}
	got, err := b.ShowReservation(ctx, id)
	if err != nil {
		return id, fmt.Errorf("reservation %s was created but cannot be read back: %w", id, err)
	}
	if got.Nodes < spec.Nodes {
		if derr := b.DeleteReservation(ctx, id); derr != nil {
			return "", fmt.Errorf("%w: %s granted only %d of %d nodes for reservation %s, and deleting it failed: %w",
				backends.ErrRejected, b.cfg.Name, got.Nodes, spec.Nodes, id, derr)
		}
		return "", fmt.Errorf("%w: %s has only %d of the %d requested nodes free in that window (reservation %s withdrawn)",
			backends.ErrRejected, b.cfg.Name, got.Nodes, spec.Nodes, id)
	}
	return id, nil
}

// ShowReservation reads one reservation back.
func (b *Backend) ShowReservation(ctx context.Context, id backends.ResvID) (*backends.Reservation, error) {
	if !resvNameRe.MatchString(string(id)) {
		return nil, fmt.Errorf("%w: reservation id %q", backends.ErrInvalidSpec, id)
	}
	argv := ShowReservationArgv(id)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		if strings.Contains(Message(r), "not found") {
			return nil, fmt.Errorf("%w: reservation %s not found on %s", backends.ErrRejected, id, b.cfg.Name)
		}
		return nil, b.commandErr(argv, r)
	}
	rs, err := ParseReservations(r.Stdout, b.cfg.Location)
	if err != nil {
		return nil, err
	}
	for i := range rs {
		if rs[i].ID == id {
			return &rs[i], nil
		}
	}
	return nil, badOutput("scontrol show reservation", r.Stdout, "reservation "+string(id)+" not in the output")
}

// DeleteReservation deletes a reservation; one that does not exist is not
// an error. SLURM refuses while jobs still reference it (ErrRejected).
func (b *Backend) DeleteReservation(ctx context.Context, id backends.ResvID) error {
	if !resvNameRe.MatchString(string(id)) {
		return fmt.Errorf("%w: reservation id %q", backends.ErrInvalidSpec, id)
	}
	argv := DeleteReservationArgv(id)
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		if strings.Contains(Message(r), "Requested reservation is invalid") {
			return nil
		}
		return b.commandErr(argv, r)
	}
	return nil
}

// sbatchArgs are spec's sbatch options at this site: the site's partition,
// and its account when the job names none.
func (b *Backend) sbatchArgs(spec *backends.JobSpec) []string {
	sp := *spec
	if sp.Account == "" {
		sp.Account = b.cfg.Account
	}
	return SbatchArgs(&sp, b.cfg.Partition)
}
