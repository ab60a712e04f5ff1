package sshbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Config is what a Backend needs of one site beyond its dialect.
type Config struct {
	Name string // site name (Backend.Name)
	// RemoteDir holds the job directories (<RemoteDir>/gridsub/<grid id>).
	// Relative paths are relative to the login directory; "" (or "~") is
	// the login directory itself. The Stager is rooted here.
	RemoteDir string
	// User is the login user (Exec.User).
	User   string
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
	// Budget is the site's scheduler-command budget (zero fields: the
	// defaults, see BudgetConfig).
	Budget BudgetConfig
	// Now is the clock of the budget and the poll schedule; nil = time.Now.
	Now func() time.Time
	// CommandTimeout bounds each remote command (0: DefaultCommandTimeout).
	CommandTimeout time.Duration
	// NativeArrays: the elements of a grid array bound for the site go as
	// native arrays (SubmitArrays) when the dialect has them (Arrayer).
	NativeArrays bool
}

// DefaultBatchSessions: sbatch and qsub mostly wait for their server, so
// when a cycle's jobs for the site fill several batches (over ~100 jobs),
// the batches run in parallel sessions (measured on the SLURM testbed, 500
// jobs: 1 session 132 jobs/s, 2: 205, 4: 354; docs/performance.md). Four
// is half the transport's default session slots, leaving room for polls.
const DefaultBatchSessions = 4

// Backend drives one batch site through a Runner and a Stager in a
// Dialect: it implements backends.Backend and the capabilities Finder,
// Fetcher, BatchSubmitter, DataHolder, LogReader, LinkEstimator and
// Connectivity, and Reserver through a dialect that is a Reserver.
type Backend struct {
	cfg   Config
	d     Dialect
	x     *Exec
	stage backends.Stager // rooted at cfg.RemoteDir; nil = no staging
	log   *slog.Logger
	// link is the connection made by Dial (the zero Link for a Backend
	// built with New).
	link Link

	mu   sync.Mutex
	dirs map[backends.JobID]string // job id -> job directory as the login shell sees it

	bud  *Budget
	poll pollState // guarded by mu
}

var (
	_ backends.Backend        = (*Backend)(nil)
	_ backends.Finder         = (*Backend)(nil)
	_ backends.Fetcher        = (*Backend)(nil)
	_ backends.Reserver       = (*Backend)(nil)
	_ backends.BatchSubmitter = (*Backend)(nil)
	_ backends.DataHolder     = (*Backend)(nil)
	_ backends.LogReader      = (*Backend)(nil)
	_ backends.LinkEstimator  = (*Backend)(nil)
	_ backends.Connectivity   = (*Backend)(nil)
)

// New builds the backend of dialect d. run executes commands at the login
// node; stage, if not nil, is called once with the remote directory and
// must return a Stager confined to it (without it, inputs, site files, logs
// and FetchOutputs are unsupported).
func New(cfg Config, d Dialect, run backends.Runner, stage func(root string) backends.Stager) *Backend {
	// The remote shell never sees RemoteDir unquoted, so "~" is not
	// expanded there: a leading "~/" means the login directory, which is
	// where relative paths start anyway.
	cfg.RemoteDir = TrimHome(cfg.RemoteDir)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("site", cfg.Name, "backend", d.Traits().Kind)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	bud := NewBudget(cfg.Budget, cfg.Now, log)
	b := &Backend{cfg: cfg, d: d, log: log, dirs: map[backends.JobID]string{}, bud: bud,
		x: &Exec{Site: cfg.Name, User: cfg.User, Log: log, run: run, d: d, bud: bud, timeout: cfg.CommandTimeout}}
	if stage != nil {
		b.stage = stage(cfg.RemoteDir)
	}
	return b
}

// TrimHome makes a remote directory given as "~" or "~/dir" relative to
// the login directory ("" or "dir"), as the remote side sees it unexpanded.
func TrimHome(dir string) string {
	if dir == "~" {
		return ""
	}
	if rest, ok := strings.CutPrefix(dir, "~/"); ok {
		return rest
	}
	return dir
}

// Name is the site name.
func (b *Backend) Name() string { return b.cfg.Name }

// RemoteDir is the directory that holds the job directories ("." for the
// login directory).
func (b *Backend) RemoteDir() string {
	if b.cfg.RemoteDir == "" {
		return "."
	}
	return b.cfg.RemoteDir
}

// Exec is the site's command runner, for a dialect package's own
// capabilities.
func (b *Backend) Exec() *Exec { return b.x }

// checkSpec is what every dialect needs (CheckSpec) and the dialect's own.
func (b *Backend) checkSpec(spec *backends.JobSpec) error {
	if err := CheckSpec(spec); err != nil {
		return err
	}
	return b.d.CheckSpec(spec)
}

// Info reports the site's size and load (the dialect's commands). A
// routine call (backends.Routine) gets the last report while it is younger
// than the budget's CapacityEvery (or the budget has no token left, or the
// site is backed off from), unless a job at the site was seen to end since;
// every other call asks the site.
func (b *Backend) Info(ctx context.Context) (*backends.SiteInfo, error) {
	if backends.IsRoutine(ctx) {
		if in, err, ok := b.cachedInfo(); ok {
			return in, err
		}
		ctx = asPoll(ctx)
	}
	in, err := b.d.Info(ctx, b.x)
	b.infoTaken(in, err)
	if err != nil {
		return nil, err
	}
	return copyInfo(in), nil
}

// Submit checks spec, stages its inputs into the job directory, and runs
// the dialect's submission command there with the wrapper on its stdin:
// one SFTP write per input plus one remote command (and whatever the
// dialect asks the site first).
func (b *Backend) Submit(ctx context.Context, spec *backends.JobSpec) (backends.JobID, error) {
	dir, cmd, err := b.prepare(ctx, spec, false)
	if err != nil {
		return "", err
	}
	b.submitted()
	r, err := b.x.Run(ctx, cmd.Argv, strings.NewReader(cmd.Stdin))
	if err != nil {
		return "", SentErr(err)
	}
	return b.accepted(spec, dir, cmd.Argv, r)
}

// prepare checks spec, builds its submission command and stages its
// inputs; it returns the job directory as the login shell sees it.
func (b *Backend) prepare(ctx context.Context, spec *backends.JobSpec, batched bool) (string, Command, error) {
	if err := b.checkSpec(spec); err != nil {
		return "", Command{}, err
	}
	rel := JobDir(spec)
	dir := path.Join(b.RemoteDir(), rel)
	cmd, err := b.d.SubmitCommand(ctx, b.x, spec, dir, batched)
	if err != nil {
		return "", Command{}, err
	}
	if len(spec.Inputs) > 0 {
		if b.stage == nil {
			return "", Command{}, fmt.Errorf("%w: %s has no stager, cannot stage %d input(s)", backends.ErrUnsupported, b.cfg.Name, len(spec.Inputs))
		}
		budget := b.maxJobBytes()
		for _, in := range spec.Inputs {
			n, err := b.put(ctx, rel, in, budget)
			if err != nil {
				return "", Command{}, err
			}
			budget -= n
		}
	}
	return dir, cmd, nil
}

// accepted reads the submission's result for spec (run by argv in dir)
// and records the job's directory.
func (b *Backend) accepted(spec *backends.JobSpec, dir string, argv []string, r backends.Result) (backends.JobID, error) {
	if r.ExitCode != 0 {
		return "", b.x.Fail(argv, r)
	}
	id, err := b.d.ParseSubmitted(r.Stdout)
	if err != nil {
		return "", err
	}
	b.setDir(id, dir)
	b.log.Debug("submitted", "grid_id", spec.GridID, "job", id, "dir", dir)
	return id, nil
}

func (b *Backend) setDir(id backends.JobID, dir string) {
	b.mu.Lock()
	b.dirs[id] = dir
	b.mu.Unlock()
}

// Status answers for all ids with the dialect's Query (one command per
// Traits.MaxIDs ids, in practice one, plus the rungs of its ending ladder
// for the jobs that left the queue listing); ids the batch system has no
// record of are looked up in one read of their exit-code files. A job no
// rung confirms stays "ending" (its last state, Reason saying so) for
// EndingGrace, and is StateLost only then.
//
// A routine call (backends.Routine) follows the site's poll schedule and
// budget: it is sent only when a poll is due (PollFast soon after a
// submission, an observed change or a job's expected end; PollSlow
// otherwise) and a token is left, else it returns ErrDeferred without
// asking; while the site is backed off from it returns ErrUnavailable.
func (b *Backend) Status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	if backends.IsRoutine(ctx) {
		if err := b.pollDue(ids); err != nil {
			return nil, err
		}
		ctx = asPoll(ctx)
	}
	out, err := b.status(ctx, ids)
	if err == nil {
		b.polled(out)
	}
	return out, err
}

func (b *Backend) status(ctx context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	t := b.d.Traits()
	found := make(map[backends.JobID]backends.JobStatus, len(ids))
	var query []backends.JobID
	seen := map[backends.JobID]bool{}
	for _, id := range ids {
		if b.d.ValidJobID(string(id)) && !seen[id] {
			seen[id] = true
			query = append(query, id)
		}
	}
	for _, c := range Chunks(query, t.MaxIDs) {
		if err := b.d.Query(ctx, b.x, c, found); err != nil {
			return nil, err
		}
	}
	var missing []backends.JobID
	for _, id := range query {
		if _, ok := found[id]; !ok {
			missing = append(missing, id)
		}
	}
	for _, c := range Chunks(missing, t.MaxIDs) {
		if err := b.fromExitFiles(ctx, c, found); err != nil {
			return nil, err
		}
	}
	out := make([]backends.JobStatus, len(ids))
	for i, id := range ids {
		st, ok := found[id]
		if !ok {
			st = b.unconfirmed(id, "no record at the site ("+t.Records+", exit-code file)")
		}
		out[i] = st
	}
	return out, nil
}

// fromExitFiles reads the exit-code files of the ids whose job directory
// is known, in one command.
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
	r, err := b.x.Plain(ctx, ExitFilesArgv(paths), nil)
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
			Reason: "from the exit-code file (" + b.d.Traits().System + " has no record left)"}
	}
	return nil
}

// Cancel cancels one job; a job that has already ended (or that the batch
// system no longer knows) is not an error.
func (b *Backend) Cancel(ctx context.Context, id backends.JobID) error {
	if !b.d.ValidJobID(string(id)) {
		return fmt.Errorf("%w: %q is not a %s job id", backends.ErrUnknownJob, id, b.d.Traits().System)
	}
	// A site being backed off from (it did not answer, or said it is
	// overloaded) is not asked again at once: the cancel is retryable and
	// the broker owes it until the site answers.
	if err := b.bud.BackingOff(); err != nil {
		return fmt.Errorf("%s: cancelling %s: %w", b.cfg.Name, id, err)
	}
	argv := b.d.CancelArgv(id)
	r, err := b.x.Run(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 && !b.d.Ended(b.x.Message(r)) {
		return b.x.Fail(argv, r)
	}
	return nil
}

// FindByGridID lists every job tagged with gridID the dialect finds; the
// jobs the batch system forgot have the state of their exit-code file, or
// StateLost without one.
func (b *Backend) FindByGridID(ctx context.Context, gridID string) ([]backends.JobStatus, error) {
	if !ValidGridID(gridID) {
		return nil, fmt.Errorf("%w: grid id %q", backends.ErrInvalidSpec, gridID)
	}
	fs, err := b.d.Find(ctx, b.x, gridID)
	if err != nil {
		return nil, err
	}
	var gone []backends.JobID
	for _, f := range fs {
		if f.Dir != "" {
			b.setDir(f.Status.ID, f.Dir)
		}
		if f.Gone {
			gone = append(gone, f.Status.ID)
		}
	}
	found := map[backends.JobID]backends.JobStatus{}
	for _, c := range Chunks(gone, b.d.Traits().MaxIDs) {
		if err := b.fromExitFiles(ctx, c, found); err != nil {
			return nil, err
		}
	}
	out := make([]backends.JobStatus, 0, len(fs))
	for _, f := range fs {
		st := f.Status
		if f.Gone {
			var ok bool
			if st, ok = found[f.Status.ID]; !ok {
				st = backends.JobStatus{ID: f.Status.ID, State: backends.StateLost, ExitCode: -1,
					Reason: b.d.Traits().System + " has no record and the job left no exit-code file"}
			}
		}
		st.GridID = gridID
		out = append(out, st)
	}
	return out, nil
}

// SubmitBatch submits specs in as few remote commands as fit (one for a
// cycle's jobs in practice; see Submit): each job is checked and its
// inputs staged first (and, for a dialect with Traits.MkdirBatch, every
// job directory made in one `mkdir -p`), then one `/bin/sh -c <script>
// gridsub-batch` runs each job's submission command, and every job's id is
// read back from its own section of the output. A job the batch system
// refused has its own error (ErrRejected with its words); the jobs of a
// cut batch are looked up by their tags among the login user's live jobs,
// and a job not found is ErrOutcomeUnknown.
func (b *Backend) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	res := make([]backends.SubmitResult, len(specs))
	var subs []Submission
	var at []int
	var dirs []string
	for i, spec := range specs {
		dir, cmd, err := b.prepare(ctx, spec, true)
		if err != nil {
			res[i].Err = err
			continue
		}
		subs = append(subs, Submission{Tag: spec.GridID, Cmd: cmd})
		at = append(at, i)
		dirs = append(dirs, dir)
	}
	if b.d.Traits().MkdirBatch {
		if err := b.mkdirs(ctx, dirs); err != nil {
			for k := range subs {
				res[at[k]].Err = err
			}
			return res
		}
	}
	par := b.cfg.BatchSessions
	if par <= 0 {
		par = DefaultBatchSessions
	}
	// Each job's command reaches the batch system (one sbatch or qsub
	// each): counted and paid for, never held back.
	b.submitted()
	b.bud.ChargeDemand(len(subs))
	site := Site{Name: b.cfg.Name, Parallel: par,
		Run: boundRunner{r: b.x.run, d: b.x.commandTimeout() + time.Duration(min(len(subs), DefaultMaxCommands))*BatchCommandTime, bud: b.bud},
		Accept: func(k int, r backends.Result) (backends.JobID, error) {
			return b.accepted(specs[at[k]], dirs[k], subs[k].Cmd.Argv, r)
		},
		Lookup: func(ctx context.Context, ks []int) (map[int]backends.JobID, error) {
			return b.lookupTags(ctx, ks, subs, dirs)
		}}
	for k, r := range Submit(ctx, site, subs) {
		res[at[k]] = r
	}
	return res
}

// lookupTags finds the jobs of subs[ks] by their grid ids (Submission.Tag)
// among the login user's live jobs (a job submitted a moment ago is surely still there; one
// that already ended stays outcome-unknown, for FindByGridID to find).
func (b *Backend) lookupTags(ctx context.Context, ks []int, subs []Submission, dirs []string) (map[int]backends.JobID, error) {
	byTag, err := b.d.Live(ctx, b.x)
	if err != nil {
		return nil, err
	}
	out := map[int]backends.JobID{}
	for _, k := range ks {
		if id, ok := byTag[subs[k].Tag]; ok {
			out[k] = id
			b.setDir(id, dirs[k])
			b.log.Info("job of a cut batch found by its tag", "grid_id", subs[k].Tag, "job", id)
		}
	}
	return out, nil
}

// mkdirs makes the job directories in one command (per Traits.MaxIDs of
// them). A failure fails every job of the batch: none was submitted.
func (b *Backend) mkdirs(ctx context.Context, dirs []string) error {
	n := b.d.Traits().MaxIDs
	for lo := 0; lo < len(dirs); lo += n {
		argv := MkdirArgv(dirs[lo:min(lo+n, len(dirs))])
		r, err := b.x.Plain(ctx, argv, nil)
		if err != nil {
			if !errors.Is(err, backends.ErrUnavailable) && ctx.Err() == nil {
				err = fmt.Errorf("%w: %w", backends.ErrUnavailable, err)
			}
			return fmt.Errorf("making the job directories, nothing submitted: %w", err)
		}
		if r.ExitCode != 0 {
			return fmt.Errorf("%w: %s: cannot make the job directories, nothing submitted: %s", backends.ErrRejected, b.cfg.Name, b.x.Message(r))
		}
	}
	return nil
}

// MkdirBatch reports whether SubmitBatch makes the job directories in one
// command before the batch (the dialect's Traits.MkdirBatch).
func (b *Backend) MkdirBatch() bool { return b.d.Traits().MkdirBatch }
