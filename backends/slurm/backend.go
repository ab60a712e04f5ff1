package slurm

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// Config describes one SLURM site as the backend sees it.
type Config struct {
	Name      string // site name (Backend.Name)
	Partition string // partition to submit into; "" = the cluster's default
	Account   string // account to charge when the job names none; "" = the user's default
	// RemoteDir, User, Logger, MaxJobBytes, MaxFileSize and BatchSessions
	// are sshbatch.Config's; reservations are made for User when a
	// ReservationSpec names no users.
	RemoteDir, User string
	// JobCompFile is the jobcomp/filetxt log; "" = read JobCompLoc from
	// `scontrol show config` on first need; "-" = do not use one.
	JobCompFile string
	// Location is the controller's time zone, for the ISO times of the
	// jobcomp log; nil = time.Local.
	Location *time.Location
	// Now is the clock for reservation start times and sacct bounds; nil =
	// time.Now.
	Now           func() time.Time
	Logger        *slog.Logger
	MaxJobBytes   int64
	MaxFileSize   int64
	BatchSessions int
	// Budget is the site's scheduler-command budget (sshbatch.BudgetConfig;
	// zero fields: the defaults); CommandTimeout bounds one remote command
	// (0: sshbatch.DefaultCommandTimeout).
	Budget         sshbatch.BudgetConfig
	CommandTimeout time.Duration
	// NativeArrays: grid array elements bound for the site go as native
	// arrays (sbatch --array; sshbatch.Backend.SubmitArrays).
	NativeArrays bool
}

// MaxIDsPerCommand bounds the job ids put into one squeue/grep/sacct argv.
const MaxIDsPerCommand = 5000

// Backend drives one SLURM cluster: the shared SSH batch backend
// (sshbatch.Backend) in the SLURM dialect, plus the withdrawal of a job
// that has not started (Withdraw).
type Backend struct{ *sshbatch.Backend }

var (
	_ backends.Backend  = (*Backend)(nil)
	_ sshbatch.Dialect  = (*dialect)(nil)
	_ sshbatch.Reserver = (*dialect)(nil)
)

// New builds the backend over run and stage as sshbatch.New does.
func New(cfg Config, run backends.Runner, stage func(root string) backends.Stager) *Backend {
	return &Backend{sshbatch.New(shared(cfg), newDialect(cfg), run, stage)}
}

// Connect dials the cluster's login node as sshbatch.Dial does (cfg.User
// defaults to ssh.User); Close the backend to close the connection.
func Connect(ctx context.Context, cfg Config, ssh transport.Config) (*Backend, error) {
	b, err := sshbatch.Dial(ctx, shared(cfg), newDialect(cfg), ssh)
	if err != nil {
		return nil, err
	}
	return &Backend{b}, nil
}

func shared(cfg Config) sshbatch.Config {
	return sshbatch.Config{Name: cfg.Name, RemoteDir: cfg.RemoteDir, User: cfg.User, Logger: cfg.Logger,
		MaxJobBytes: cfg.MaxJobBytes, MaxFileSize: cfg.MaxFileSize, BatchSessions: cfg.BatchSessions,
		Budget: cfg.Budget, Now: cfg.Now, CommandTimeout: cfg.CommandTimeout, NativeArrays: cfg.NativeArrays}
}

// dialect is SLURM for sshbatch.Backend.
type dialect struct {
	cfg Config

	mu         sync.Mutex
	jobcomp    string // resolved jobcomp file ("-" = none)
	noSacct    bool   // sacct said accounting is disabled
	sacctErr   string
	maxArray   int                       // MaxArraySize once read (0: not yet)
	elements   map[string]elementListing // native arrays' elements in accounting, by the array's tag
	accts      []string                  // the login user's accounts (accounts.go; nil: not known)
	acctsAt    time.Time                 // when they were read (zero: never)
	noAssoc    bool                      // sacctmgr said the site has no accounting
	assocFails int                       // sacctmgr's failures in a row (slurmdbd down)
}

func newDialect(cfg Config) *dialect {
	cfg.RemoteDir = sshbatch.TrimHome(cfg.RemoteDir)
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &dialect{cfg: cfg, jobcomp: cfg.JobCompFile}
}

func (d *dialect) Traits() sshbatch.Traits {
	return sshbatch.Traits{Kind: "slurm", System: "SLURM", MaxIDs: MaxIDsPerCommand,
		Records: "squeue, sacct, scontrol show job, jobcomp log", MkdirBatch: true}
}

func (d *dialect) ValidJobID(id string) bool { return validJobID(id) }

func (d *dialect) CheckSpec(spec *backends.JobSpec) error { return checkSpec(spec) }

// Command names the SLURM command an argv runs.
func (d *dialect) Command(argv []string) string { return cmdName(argv) }

func cmdName(argv []string) string {
	for i, a := range argv {
		switch a {
		case "squeue", "sbatch", "scontrol", "sinfo", "scancel", "sacct", "sacctmgr", "grep":
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

var unavailableRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)unable to contact|socket timed out|connection refused|slurm_receive_msg|zero bytes were transmitted|communications connection failure|try again|temporarily unavailable|resource temporarily`)
})

// Failure reads SLURM's words: the controller could not be reached, or it
// refused.
func (d *dialect) Failure(r backends.Result) (string, bool) {
	msg := Message(r)
	return msg, unavailableRe().MatchString(msg)
}

// Info reports nodes, idle nodes, cores per node and partitions of the
// configured partition (or the default one), the login user's accounts
// where the site's accounting lists them, and the live jobs' node blocks
// with their end times: two commands, sinfo and squeue (and sacctmgr every
// AccountsEvery). A configured partition or account the site does not
// have fails it with ErrRejected and backends.MissingName's text.
func (d *dialect) Info(ctx context.Context, x *sshbatch.Exec) (*backends.SiteInfo, error) {
	r, err := x.Output(ctx, SinfoArgv())
	if err != nil {
		return nil, err
	}
	recs, err := ParseSinfo(r.Stdout)
	if err != nil {
		return nil, err
	}
	info := &backends.SiteInfo{Name: d.cfg.Name, Kind: "slurm"}
	part := d.cfg.Partition
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
		return nil, fmt.Errorf("%w: %s", backends.ErrRejected, backends.MissingName(d.cfg.Name, "partition", "partition", part, parts))
	}
	info.Partitions = append(info.Partitions, part)
	for _, p := range parts {
		if p != part {
			info.Partitions = append(info.Partitions, p)
		}
	}
	accts, err := d.accounts(ctx, x)
	if err != nil {
		return nil, err
	}
	if accts != nil && d.cfg.Account != "" && !slices.Contains(accts, d.cfg.Account) {
		return nil, fmt.Errorf("%w: %s", backends.ErrRejected, backends.MissingName(d.cfg.Name, "account", "account", d.cfg.Account, accts))
	}
	info.Accounts = accts
	seenNode := map[string]bool{}
	for _, n := range recs {
		if n.Partition != part || seenNode[n.Node] {
			continue
		}
		seenNode[n.Node] = true
		if !NodeUsable(n.State) {
			if NodeTransient(n.State) {
				info.Nodes++ // recovering: part of the site, not free
				info.CoresPerNode = max(info.CoresPerNode, n.CPUs)
				info.MemPerNode = max(info.MemPerNode, n.MemMiB<<20)
				info.GPUsPerNode = max(info.GPUsPerNode, n.GPUs)
			}
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
	jobs, err := squeue(ctx, x, SqueueActiveArgv())
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

// SubmitCommand is sbatch of the wrapper in the job directory with the
// site's partition, and its account when the job names none: alone, a
// script that makes the directory, stores the wrapper there and submits it
// (SubmitArgv); in a batch, sbatch reading the wrapper from its stdin
// (BatchSbatchArgv; the Backend made the directory).
func (d *dialect) SubmitCommand(_ context.Context, _ *sshbatch.Exec, spec *backends.JobSpec, dir string, batched bool) (sshbatch.Command, error) {
	sp := *spec
	if sp.Account == "" {
		sp.Account = d.cfg.Account
	}
	args := SbatchArgs(&sp, d.cfg.Partition)
	if batched {
		return sshbatch.Command{Argv: BatchSbatchArgv(dir, args), Stdin: Wrapper(spec)}, nil
	}
	return sshbatch.Command{Argv: SubmitArgv(dir, args), Stdin: Wrapper(spec)}, nil
}

func (d *dialect) ParseSubmitted(stdout []byte) (backends.JobID, error) {
	id, _, err := ParseSbatch(stdout)
	return id, err
}

// Query asks squeue for ids; a job that left its listing is confirmed by
// the next rung of the ending ladder: sacct (one call with an explicit
// start time, all states; skipped once the site said accounting is
// disabled), then the controller's own record (`scontrol show job`, at
// most ScontrolRung jobs a poll), then the jobcomp log where the site
// keeps one. The Backend reads the exit-code files of the jobs still
// unconfirmed.
func (d *dialect) Query(ctx context.Context, x *sshbatch.Exec, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	argv := SqueueArgv(ids)
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return err
	}
	switch {
	case r.ExitCode == 0:
		recs, err := ParseSqueue(r.Stdout)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			found[rec.Status.ID] = rec.Status
		}
	case strings.Contains(Message(r), "Invalid job id specified"):
		// every id is unknown to the controller
	default:
		return x.Fail(argv, r)
	}
	for _, from := range []func(context.Context, *sshbatch.Exec, []backends.JobID, map[backends.JobID]backends.JobStatus) error{
		d.fromSacct, d.fromScontrol, d.fromJobComp} {
		var missing []backends.JobID
		for _, id := range ids {
			if _, ok := found[id]; !ok {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if err := from(ctx, x, missing, found); err != nil {
			return err
		}
	}
	return nil
}

// jobCompFile resolves the jobcomp log once ("" when the site has none).
func (d *dialect) jobCompFile(ctx context.Context, x *sshbatch.Exec) (string, error) {
	d.mu.Lock()
	f := d.jobcomp
	d.mu.Unlock()
	if f == "" {
		r, err := x.Output(ctx, ConfigArgv())
		if err != nil {
			return "", err
		}
		typ, _ := configValue(r.Stdout, "JobCompType")
		loc, _ := configValue(r.Stdout, "JobCompLoc")
		f = "-"
		if typ == "jobcomp/filetxt" && strings.HasPrefix(loc, "/") {
			f = loc
		}
		d.mu.Lock()
		d.jobcomp = f
		d.mu.Unlock()
	}
	if f == "-" {
		return "", nil
	}
	return f, nil
}

func (d *dialect) fromJobComp(ctx context.Context, x *sshbatch.Exec, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	file, err := d.jobCompFile(ctx, x)
	if err != nil || file == "" {
		return err
	}
	r, err := x.Run(ctx, JobCompArgv(file, ids), nil)
	if err != nil {
		return err
	}
	if r.ExitCode > 1 { // 1 = no line matched
		x.Log.Warn("cannot read the jobcomp log", "file", file, "err", Message(r))
		return nil
	}
	recs, err := ParseJobComp(r.Stdout, d.cfg.Location)
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

func (d *dialect) fromSacct(ctx context.Context, x *sshbatch.Exec, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	d.mu.Lock()
	skip := d.noSacct
	d.mu.Unlock()
	if skip {
		return nil
	}
	r, err := x.Run(ctx, SacctArgv(ids, d.cfg.Now().Add(-30*24*time.Hour)), nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		msg := Message(r)
		d.mu.Lock()
		d.noSacct, d.sacctErr = true, msg
		d.mu.Unlock()
		x.Log.Info("sacct unavailable at this site; relying on the jobcomp log and exit-code files", "err", msg)
		return nil
	}
	sts, err := ParseSacct(r.Stdout)
	if err != nil {
		return err
	}
	for _, st := range sts {
		found[st.ID] = st
	}
	return nil
}

// ScontrolRung bounds the jobs asked about one by one with `scontrol show
// job` in one poll (the others wait for the next poll's ladder).
const ScontrolRung = 4

// fromScontrol asks the controller for the jobs neither squeue nor sacct
// knows (squeue -j leaves out a job whose record it cannot show; the
// controller keeps a finished job MinJobAge).
func (d *dialect) fromScontrol(ctx context.Context, x *sshbatch.Exec, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	for _, id := range ids[:min(len(ids), ScontrolRung)] {
		argv := ScontrolJobArgv(id)
		r, err := x.Run(ctx, argv, nil)
		if err != nil {
			return err
		}
		if r.ExitCode != 0 {
			if strings.Contains(Message(r), "Invalid job id") {
				continue
			}
			return x.Fail(argv, r)
		}
		sts, err := ParseScontrolJobs(r.Stdout, d.cfg.Location)
		if err != nil {
			return err
		}
		for _, st := range sts {
			if st.ID == id && st.State != backends.StateUnknown {
				st.Reason = "from scontrol show job"
				found[id] = st
			}
		}
	}
	return nil
}

// Accounting reports whether the site's sacct answers ("" and true until
// a call said otherwise; else false and sacct's words).
func (d *dialect) Accounting() (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.noSacct, d.sacctErr
}

// CancelArgv is scancel of one job.
func (d *dialect) CancelArgv(id backends.JobID) []string { return ScancelArgv(id) }

// Ended: scancel's words for a job that is gone or ending.
func (d *dialect) Ended(msg string) bool {
	return strings.Contains(msg, "Invalid job id") || strings.Contains(msg, "already completing or completed")
}

// Find lists the login user's jobs squeue still knows tagged with gridID
// (the tag is in --comment); an element of a native array squeue forgot,
// by its array's tag in accounting or by its id file
// (findForgottenElement); else finished ones in the jobcomp log whose
// working directory is one of the grid job's directories.
func (d *dialect) Find(ctx context.Context, x *sshbatch.Exec, gridID string) ([]sshbatch.Found, error) {
	recs, err := squeue(ctx, x, SqueueMineArgv())
	if err != nil {
		return nil, err
	}
	var out []sshbatch.Found
	seen := map[backends.JobID]bool{}
	for _, rec := range recs {
		if rec.Status.GridID == gridID {
			out = append(out, sshbatch.Found{Status: rec.Status})
			seen[rec.Status.ID] = true
		}
	}
	if _, _, _, elem := backends.ArrayElement(gridID); elem && len(out) == 0 {
		// An element of a native array squeue forgot: the jobcomp log
		// names the array's directory, not the element's. An element
		// submitted alone is found in the jobcomp log below.
		if fs, err := d.findForgottenElement(ctx, x, gridID); err != nil || len(fs) > 0 {
			return fs, err
		}
	}
	file, err := d.jobCompFile(ctx, x)
	if err != nil || file == "" {
		return out, err
	}
	r, err := x.Run(ctx, JobCompGridArgv(file, gridID), nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode > 1 {
		return out, nil
	}
	comp, err := ParseJobComp(r.Stdout, d.cfg.Location)
	if err != nil {
		return nil, err
	}
	for _, c := range comp {
		if !sshbatch.DirBelongs(c.WorkDir, gridID) || seen[c.Status.ID] {
			continue
		}
		// Only this backend's own job directories: another broker (or an
		// earlier one) with other RemoteDir may have used the same tag. A
		// relative RemoteDir cannot be compared with the absolute WorkDir
		// of the log; such a site is trusted as before.
		dir, mine := d.ownDir(c.WorkDir)
		if !mine && path.IsAbs(d.cfg.RemoteDir) {
			continue
		}
		out = append(out, sshbatch.Found{Status: c.Status, Dir: dir})
		seen[c.Status.ID] = true
	}
	return out, nil
}

// squeue runs a listing of jobs (SqueueArgv and kin) and reads it.
func squeue(ctx context.Context, x *sshbatch.Exec, argv []string) ([]QueueRecord, error) {
	r, err := x.Output(ctx, argv)
	if err != nil {
		return nil, err
	}
	return ParseSqueue(r.Stdout)
}

// ownDir maps an absolute job directory to the same directory under
// RemoteDir when it lies there (only possible when RemoteDir is absolute).
func (d *dialect) ownDir(abs string) (string, bool) {
	i := strings.LastIndex(abs, "/gridsub/")
	if i < 0 || !path.IsAbs(d.cfg.RemoteDir) || path.Clean(abs[:i]) != path.Clean(d.cfg.RemoteDir) {
		return "", false
	}
	return path.Join(d.cfg.RemoteDir, abs[i+1:]), true
}

// Live maps the grid ids of the login user's jobs squeue knows to their
// ids (one squeue; a job just submitted is surely there).
func (d *dialect) Live(ctx context.Context, x *sshbatch.Exec) (map[string]backends.JobID, error) {
	recs, err := squeue(ctx, x, SqueueMineArgv())
	if err != nil {
		return nil, err
	}
	byGrid := map[string]backends.JobID{}
	for _, rec := range recs {
		g := rec.Status.GridID
		if _, dup := byGrid[g]; g != "" && !dup {
			byGrid[g] = rec.Status.ID
		}
	}
	return byGrid, nil
}

// Reserve makes a native reservation. SLURM silently clamps NodeCnt to the
// nodes that are free in the window, so the reservation is read back: the
// Backend withdraws a smaller one.
func (d *dialect) Reserve(ctx context.Context, x *sshbatch.Exec, rs *backends.ReservationSpec) (*backends.Reservation, error) {
	if !resvNameRe().MatchString(rs.Name) {
		return nil, fmt.Errorf("%w: reservation name %q must be 1-64 letters, digits, '.', '_' or '-'", backends.ErrInvalidSpec, rs.Name)
	}
	r, err := x.Output(ctx, CreateReservationArgv(rs, d.cfg.Now(), d.cfg.Partition))
	if err != nil {
		return nil, err
	}
	id, err := ParseReservationCreated(r.Stdout)
	if err != nil {
		return nil, err
	}
	got, err := d.Show(ctx, x, id)
	if err != nil {
		return &backends.Reservation{ID: id}, fmt.Errorf("reservation %s was created but cannot be read back: %w", id, err)
	}
	return got, nil
}

// Show reads one reservation back.
func (d *dialect) Show(ctx context.Context, x *sshbatch.Exec, id backends.ResvID) (*backends.Reservation, error) {
	if !resvNameRe().MatchString(string(id)) {
		return nil, fmt.Errorf("%w: reservation id %q", backends.ErrInvalidSpec, id)
	}
	argv := ShowReservationArgv(id)
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		if strings.Contains(Message(r), "not found") {
			return nil, fmt.Errorf("%w: reservation %s not found on %s", backends.ErrRejected, id, d.cfg.Name)
		}
		return nil, x.Fail(argv, r)
	}
	rs, err := ParseReservations(r.Stdout, d.cfg.Location)
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

// Delete deletes a reservation; one that does not exist is not an error.
// SLURM refuses while jobs still reference it (ErrRejected).
func (d *dialect) Delete(ctx context.Context, x *sshbatch.Exec, id backends.ResvID) error {
	if !resvNameRe().MatchString(string(id)) {
		return fmt.Errorf("%w: reservation id %q", backends.ErrInvalidSpec, id)
	}
	argv := DeleteReservationArgv(id)
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 && !strings.Contains(Message(r), "Requested reservation is invalid") {
		return x.Fail(argv, r)
	}
	return nil
}
