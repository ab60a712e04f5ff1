package pbs

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// Config describes one PBS site as the backend sees it.
type Config struct {
	Name  string // site name (Backend.Name)
	Queue string // queue to submit into; "" = the server's default_queue
	// Account is the account (qsub -A) of a job that names none; "" = none.
	Account string
	// RemoteDir, User, Logger, MaxJobBytes and BatchSessions are
	// sshbatch.Config's; FindByGridID lists User's jobs, and reservations
	// are made for User when a ReservationSpec names no users.
	RemoteDir, User string
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
	Now           func() time.Time
	Logger        *slog.Logger
	MaxJobBytes   int64
	BatchSessions int
	// Budget is the site's scheduler-command budget (sshbatch.BudgetConfig;
	// zero fields: the defaults); CommandTimeout bounds one remote command
	// (0: sshbatch.DefaultCommandTimeout).
	Budget         sshbatch.BudgetConfig
	CommandTimeout time.Duration
	// NativeArrays: grid array elements bound for the site go as native
	// arrays (qsub -J; sshbatch.Backend.SubmitArrays).
	NativeArrays bool
}

// MaxIDsPerCommand bounds the job ids put into one qstat/grep argv.
const MaxIDsPerCommand = 2000

// Backend drives one PBS server: the shared SSH batch backend in the PBS
// dialect.
type Backend = sshbatch.Backend

var (
	_ sshbatch.Dialect  = (*dialect)(nil)
	_ sshbatch.Reserver = (*dialect)(nil)
)

// New builds the backend over run and stage as sshbatch.New does.
func New(cfg Config, run backends.Runner, stage func(root string) backends.Stager) *Backend {
	return sshbatch.New(shared(cfg), newDialect(cfg), run, stage)
}

// Connect dials the site's login node as sshbatch.Dial does (cfg.User
// defaults to ssh.User); Close the backend to close the connection.
func Connect(ctx context.Context, cfg Config, ssh transport.Config) (*Backend, error) {
	return sshbatch.Dial(ctx, shared(cfg), newDialect(cfg), ssh)
}

func shared(cfg Config) sshbatch.Config {
	return sshbatch.Config{Name: cfg.Name, RemoteDir: cfg.RemoteDir, User: cfg.User, Logger: cfg.Logger,
		MaxJobBytes: cfg.MaxJobBytes, BatchSessions: cfg.BatchSessions, Budget: cfg.Budget,
		CommandTimeout: cfg.CommandTimeout, NativeArrays: cfg.NativeArrays}
}

// dialect is PBS for sshbatch.Backend.
type dialect struct {
	cfg  Config
	cmds Cmds

	mu       sync.Mutex
	nodes    int                  // vnodes the site has (0 = not asked yet)
	cpn      int                  // CPUs per vnode
	mem      int64                // memory per vnode, bytes (0 = not known)
	gpus     int                  // GPUs per vnode
	maxArray int                  // the server's max_array_size once read (0: not yet)
	arrays   map[string]arrayList // native arrays' find listings by tag (arrayListing)
}

func newDialect(cfg Config) *dialect {
	cfg.RemoteDir = sshbatch.TrimHome(cfg.RemoteDir)
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
	return &dialect{cfg: cfg, cmds: Cmds{Bin: cfg.BinDir}}
}

func (d *dialect) Traits() sshbatch.Traits {
	return sshbatch.Traits{Kind: "pbs", System: "PBS", MaxIDs: MaxIDsPerCommand, Records: "qstat -x"}
}

func (d *dialect) ValidJobID(id string) bool { return validJobID(id) }

func (d *dialect) CheckSpec(spec *backends.JobSpec) error { return checkSpec(spec) }

// Command names the PBS command an argv runs.
func (d *dialect) Command(argv []string) string { return cmdName(argv) }

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
		case "gridsub-status", "gridsub-find":
			return "qstat"
		case "gridsub-ids":
			return "job id files"
		}
	}
	return path.Base(argv[0])
}

var unavailableRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)cannot connect to server|connection refused|communication failure|pbs_iff|timed out|temporarily unavailable|try again|server is down`)
})

// Failure reads PBS's words: the server could not be reached, or it
// refused.
func (d *dialect) Failure(r backends.Result) (string, bool) {
	msg := Message(r)
	return msg, unavailableRe().MatchString(msg)
}

// SubmitCommand checks spec against the site's size (one pbsnodes the
// first time: qsub accepts a job that can never run, which then waits for
// ever) and returns the script that makes the job directory, stores the
// wrapper there, submits it with qsub from there and records the id
// (Cmds.SubmitArgv), with the site's queue, and its account when the job
// names none. The same command serves a batch.
func (d *dialect) SubmitCommand(ctx context.Context, x *sshbatch.Exec, spec *backends.JobSpec, dir string, _ bool) (sshbatch.Command, error) {
	if err := checkRemoteDir(d.cfg.Name, d.cfg.RemoteDir); err != nil {
		return sshbatch.Command{}, err
	}
	nodes, cpn, err := d.shape(ctx, x)
	if err != nil {
		return sshbatch.Command{}, err
	}
	if spec.Nodes > nodes {
		return sshbatch.Command{}, fmt.Errorf("%w: %d nodes asked, %s has %d usable", backends.ErrRejected, spec.Nodes, d.cfg.Name, nodes)
	}
	if spec.CoresPerNode > cpn && cpn > 0 {
		return sshbatch.Command{}, fmt.Errorf("%w: %d cores per node asked, %s's nodes have %d", backends.ErrRejected, spec.CoresPerNode, d.cfg.Name, cpn)
	}
	d.mu.Lock()
	mem, gpus := d.mem, d.gpus
	d.mu.Unlock()
	if spec.MemPerNode > mem && mem > 0 {
		return sshbatch.Command{}, fmt.Errorf("%w: %d bytes of memory per node asked, %s's nodes have %d", backends.ErrRejected, spec.MemPerNode, d.cfg.Name, mem)
	}
	if spec.GPUsPerNode > gpus {
		return sshbatch.Command{}, fmt.Errorf("%w: %d GPUs per node asked, %s's nodes have %d", backends.ErrRejected, spec.GPUsPerNode, d.cfg.Name, gpus)
	}
	sp := *spec
	if sp.Account == "" {
		sp.Account = d.cfg.Account
	}
	return sshbatch.Command{Argv: d.cmds.SubmitArgv(dir, QsubArgs(&sp, d.cfg.Queue, cpn)), Stdin: Wrapper(spec)}, nil
}

func (d *dialect) ParseSubmitted(stdout []byte) (backends.JobID, error) { return ParseQsub(stdout) }

// Query asks for ids with one `qstat -x -f -F dsv` (Cmds.StatusArgv).
func (d *dialect) Query(ctx context.Context, x *sshbatch.Exec, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	recs, err := d.dsv(ctx, x, d.cmds.StatusArgv(ids))
	if err != nil {
		return err
	}
	want := map[backends.JobID]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, rec := range recs {
		if !want[rec.ID] {
			continue // another job of the id-less listing
		}
		st, err := rec.Status(d.cfg.Location)
		if err != nil {
			return err
		}
		found[rec.ID] = st
	}
	return nil
}

// dsv runs a qstat listing in DSV; exit 153 with unknown ids named on
// stderr is an answer (the known jobs are printed).
func (d *dialect) dsv(ctx context.Context, x *sshbatch.Exec, argv []string) ([]JobRecord, error) {
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 && !(r.ExitCode == 153 && len(UnknownJobIDs(r.Stderr)) > 0) {
		return nil, x.Fail(argv, r)
	}
	return ParseDSV(r.Stdout)
}

// CancelArgv is qdel of one job (qdel under-reports errors for several).
func (d *dialect) CancelArgv(id backends.JobID) []string { return d.cmds.QdelArgv(id) }

// Ended: qdel's words for a job that has finished or is unknown.
func (d *dialect) Ended(msg string) bool {
	return strings.Contains(msg, "Job has finished") || strings.Contains(msg, "Unknown Job Id")
}

// Live maps the grid ids of the login user's live jobs to their ids: one
// qstat without ids (a job submitted a moment ago is still queued, and
// the full history that Find reads takes minutes on a server with a long
// one).
func (d *dialect) Live(ctx context.Context, x *sshbatch.Exec) (map[string]backends.JobID, error) {
	if x.User == "" {
		return nil, fmt.Errorf("%w: %s: looking jobs up by tag needs the login user (Config.User)", backends.ErrInvalidSpec, x.Site)
	}
	recs, err := d.dsv(ctx, x, d.cmds.LiveDSVArgv())
	if err != nil {
		return nil, err
	}
	byGrid := map[string]backends.JobID{}
	for _, rec := range recs {
		g := rec.GridID()
		if _, dup := byGrid[g]; g != "" && !dup && rec.Owner(x.User) {
			byGrid[g] = rec.ID
		}
	}
	return byGrid, nil
}
