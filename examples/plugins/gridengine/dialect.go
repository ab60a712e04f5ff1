package gridengine

import (
	"bytes"
	"context"
	"fmt"
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

// MaxIDsPerCommand bounds the job ids put into one status command.
const MaxIDsPerCommand = 2000

var (
	_ sshbatch.Dialect  = (*dialect)(nil)
	_ sshbatch.Reserver = (*dialect)(nil)
)

// dialect is Grid Engine for sshbatch.Backend.
type dialect struct {
	cfg  Config
	cmds Cmds

	mu         sync.Mutex
	ends       map[backends.ResvID]time.Time // the ends of the reservations Show read
	limits     ArrayLimits                   // qconf -sconf's, once haveLimits
	haveLimits bool
}

func newDialect(cfg Config) *dialect {
	cfg.RemoteDir = sshbatch.TrimHome(cfg.RemoteDir)
	if cfg.BinDir == "" {
		cfg.BinDir = DefaultBinDir
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.SlotsPerNode <= 0 {
		cfg.SlotsPerNode = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &dialect{cfg: cfg, cmds: Cmds{Bin: cfg.BinDir}, ends: map[backends.ResvID]time.Time{}}
}

func (d *dialect) shape() Shape { return Shape{SlotsPerNode: d.cfg.SlotsPerNode, PE: d.cfg.PE} }

func (d *dialect) remote() string {
	if d.cfg.RemoteDir == "" {
		return "."
	}
	return d.cfg.RemoteDir
}

func (d *dialect) cancelledDir() string { return path.Join(d.remote(), CancelledDir) }

func (d *dialect) indexDir() string { return path.Join(d.remote(), IndexDir) }

func (d *dialect) Traits() sshbatch.Traits {
	return sshbatch.Traits{Kind: Kind, System: "Grid Engine", MaxIDs: MaxIDsPerCommand, Records: "qstat, qacct"}
}

// ValidJobID: a job number, or an array task "<job>.<task>".
func (d *dialect) ValidJobID(id string) bool { return validJobOrTask(id) }

// CheckSpec refuses what Grid Engine cannot be asked for here: more
// cores per node than a node's slots, GPUs (no GPU resource is defined),
// several slots without a parallel environment, a reservation that is not
// an advance-reservation number.
func (d *dialect) CheckSpec(spec *backends.JobSpec) error {
	if spec.CoresPerNode > d.cfg.SlotsPerNode {
		return fmt.Errorf("%w: %d cores per node asked, a node of %s is %d slot(s) (plugin.options.slots_per_node)",
			backends.ErrInvalidSpec, spec.CoresPerNode, d.cfg.Name, d.cfg.SlotsPerNode)
	}
	if spec.GPUsPerNode > 0 {
		return fmt.Errorf("%w: %d GPUs per node asked, %s defines no GPU resource", backends.ErrInvalidSpec, spec.GPUsPerNode, d.cfg.Name)
	}
	if d.shape().Slots(spec) > 1 && d.cfg.PE == "" {
		return fmt.Errorf("%w: %s has no parallel environment configured (plugin.options.pe): it runs single-slot jobs only, this one asks %d slots",
			backends.ErrInvalidSpec, d.cfg.Name, d.shape().Slots(spec))
	}
	if spec.Reservation != "" && !validResvID(spec.Reservation) {
		return fmt.Errorf("%w: reservation %q is not a Grid Engine advance reservation number", backends.ErrInvalidSpec, spec.Reservation)
	}
	return nil
}

// Command names the Grid Engine command an argv runs.
func (d *dialect) Command(argv []string) string {
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
		case "gridsub-array":
			return "qsub -t"
		case "gridsub-status":
			return "qstat"
		case "gridsub-tags":
			return "qstat -j"
		case "gridsub-find":
			return "qstat -j, job id files"
		case "gridsub-cancel":
			return "qdel"
		case "gridsub-info":
			return "qhost/qstat"
		}
	}
	return path.Base(argv[0])
}

var unavailableRe = regexp.MustCompile(`(?i)commlib error|unable to contact qmaster|unable to send message to qmaster|can't connect|connection refused|timed out|temporarily unavailable`)

// Failure reads Grid Engine's words: the qmaster could not be reached
// (commlib), or it refused.
func (d *dialect) Failure(r backends.Result) (string, bool) {
	msg := Message(r)
	return msg, unavailableRe.MatchString(msg)
}

// SubmitCommand returns the script that makes the job directory, stores
// the wrapper, submits it with qsub -w e (the qmaster refuses a job that
// can never run: "no suitable queues") and records the job number; a job
// in a reservation has its h_rt cut to the reservation's end there
// (submitScript; the end of a reservation this backend made or showed is
// remembered, else the script asks qrstat).
func (d *dialect) SubmitCommand(_ context.Context, _ *sshbatch.Exec, spec *backends.JobSpec, dir string, _ bool) (sshbatch.Command, error) {
	d.mu.Lock()
	end := d.ends[backends.ResvID(spec.Reservation)]
	d.mu.Unlock()
	return sshbatch.Command{Argv: d.cmds.SubmitArgv(dir, d.indexDir(), spec, end, QsubArgs(spec, d.shape(), d.cfg.Queue, d.cfg.Project)),
		Stdin: sshbatch.Wrapper(spec, "")}, nil
}

func (d *dialect) ParseSubmitted(stdout []byte) (backends.JobID, error) { return ParseQsub(stdout) }

// Query answers for ids in one command (statusScript): the live ones from
// qstat -xml, the ended ones from qacct, those gridsub deleted from their
// markers. An id none of them knows is left to the exit-code files.
func (d *dialect) Query(ctx context.Context, x *sshbatch.Exec, ids []backends.JobID, found map[backends.JobID]backends.JobStatus) error {
	if x.User == "" {
		return fmt.Errorf("%w: %s: the status command lists the login user's jobs and needs the user (ssh.user)", backends.ErrInvalidSpec, x.Site)
	}
	p, err := d.poll(ctx, x, ids)
	if err != nil {
		return err
	}
	for id, st := range p {
		found[id] = st
	}
	return nil
}

// poll runs the status command for ids and returns the status of each it
// has a record of.
func (d *dialect) poll(ctx context.Context, x *sshbatch.Exec, ids []backends.JobID) (map[backends.JobID]backends.JobStatus, error) {
	r, err := x.Output(ctx, d.cmds.StatusArgv(x.User, d.cancelledDir(), d.indexDir(), ids))
	if err != nil {
		return nil, err
	}
	p, err := ParseStatus(r.Stdout, d.cfg.Location)
	if err != nil {
		return nil, err
	}
	return Merge(p, ids, d.cfg.Location), nil
}

// Merge turns one poll into the statuses of ids (job numbers and array
// tasks "<job>.<task>"): a live one's from qstat (an entry of an array job
// lists its tasks: a running task alone, pending ones as ranges), an
// ended one's from its last accounting record, Cancelled when gridsub
// deleted it and it did not complete cleanly first. An array task's grid
// id follows from its array's tag (the index) and its task number.
func Merge(p *Polled, ids []backends.JobID, loc *time.Location) map[backends.JobID]backends.JobStatus {
	want := make(map[backends.JobID]bool, len(ids))
	tasks := map[string][]int{} // job number -> the tasks asked for
	for _, id := range ids {
		want[id] = true
		if job, task, ok := SplitTaskID(string(id)); ok {
			tasks[job] = append(tasks[job], task)
		}
	}
	out := map[backends.JobID]backends.JobStatus{}
	put := func(id backends.JobID, st backends.JobStatus) {
		if prev, ok := out[id]; ok && prev.State == backends.StateRunning {
			return
		}
		st.ID = id
		out[id] = st
	}
	for i := range p.Live {
		j := &p.Live[i]
		if strings.TrimSpace(j.Tasks) == "" {
			if id := backends.JobID(j.Number); want[id] {
				put(id, j.Status(loc))
			}
			continue
		}
		ts, err := ParseTaskSet(j.Tasks)
		if err != nil {
			continue // ParseQstatXML checked every task list
		}
		for _, t := range tasks[j.Number] {
			if ts.Has(t) {
				put(TaskID(j.Number, t), j.Status(loc))
			}
		}
	}
	cancelled := map[string]bool{}
	for _, c := range p.Cancelled {
		cancelled[c] = true
	}
	for i := range p.Acct {
		a := &p.Acct[i]
		id := a.ID()
		if _, live := out[id]; live || !want[id] {
			continue
		}
		st := a.Status()
		if cancelled[string(id)] && st.State != backends.StateCompleted {
			st.State, st.Reason = backends.StateCancelled, "deleted by gridsub (qdel); "+st.Reason
		}
		out[id] = st
	}
	for _, c := range p.Cancelled {
		id := backends.JobID(c)
		if _, ok := out[id]; !ok && want[id] {
			out[id] = backends.JobStatus{ID: id, State: backends.StateCancelled, ExitCode: -1, Reason: "deleted by gridsub (qdel) before it ran"}
		}
	}
	for id, st := range out {
		st.GridID = GridIDOf(p.GridIDs, string(id))
		out[id] = st
	}
	return out
}

// GridIDOf is the grid id of job or array task id, given the index's
// job number -> grid id or array tag ("" when the index does not say).
func GridIDOf(index map[string]string, id string) string {
	job, task, isTask := SplitTaskID(id)
	if !isTask {
		if _, _, arr := sshbatch.FromArrayTag(index[id]); arr {
			return ""
		}
		return index[id]
	}
	parent, attempt, ok := sshbatch.FromArrayTag(index[job])
	if !ok {
		return ""
	}
	return backends.ElementTag(parent, task-1, attempt)
}

// CancelArgv is qdel of one job, leaving its marker.
func (d *dialect) CancelArgv(id backends.JobID) []string {
	return d.cmds.CancelArgv(d.cancelledDir(), id)
}

// goneRe: qdel's and qrdel's words for a job, array task or reservation
// that has ended or that they do not know.
var goneRe = regexp.MustCompile(`denied: (job|advance_reservation) "[0-9]+" does not exist|job "[0-9]+" task "[0-9]+" does not exist`)

// Ended: qdel's words for a job that has ended or that it does not know.
func (d *dialect) Ended(msg string) bool { return goneRe.MatchString(msg) }

// tagged runs the tag listing and keeps the user's jobs.
func (d *dialect) tagged(ctx context.Context, x *sshbatch.Exec) ([]Tagged, error) {
	if x.User == "" {
		return nil, fmt.Errorf("%w: %s: looking jobs up by tag needs the login user (ssh.user)", backends.ErrInvalidSpec, x.Site)
	}
	r, err := x.Output(ctx, d.cmds.TagsArgv(x.User))
	if err != nil {
		return nil, err
	}
	return mine(r.Stdout, x.User)
}

// mine reads a tag listing and keeps user's jobs.
func mine(out []byte, user string) ([]Tagged, error) {
	ts, err := ParseTagged(out)
	if err != nil {
		return nil, err
	}
	var mine []Tagged
	for _, t := range ts {
		if t.Owner == user {
			mine = append(mine, t)
		}
	}
	return mine, nil
}

// Live maps the grid ids in the tags of the login user's live jobs to the
// jobs' numbers; each task of a live array job tagged with an array's tag
// (sshbatch.ArrayTag) is there under its element's tag.
func (d *dialect) Live(ctx context.Context, x *sshbatch.Exec) (map[string]backends.JobID, error) {
	ts, err := d.tagged(ctx, x)
	if err != nil {
		return nil, err
	}
	m := map[string]backends.JobID{}
	for _, t := range ts {
		if g := GridFromTag(t.Tag); g != "" {
			if _, dup := m[g]; !dup {
				m[g] = backends.JobID(t.Number)
			}
			continue
		}
		if parent, attempt, ok := sshbatch.FromArrayTag(t.Tag); ok {
			t.Tasks.Each(MaxTasks, func(task int) {
				if g := backends.ElementTag(parent, task-1, attempt); m[g] == "" {
					m[g] = TaskID(t.Number, task)
				}
			})
		}
	}
	return m, nil
}

// Find lists every job tagged with gridID: the user's live jobs carrying
// the tag (qstat -j), for an array element the task of a live array job
// tagged with its array's tag, and the jobs and tasks whose directories
// recorded their ids (IDFile) — those two in one command (FindArgv); all
// of them are then polled once (qstat, qacct, the cancel markers), and
// those no record knows are Gone (their exit-code files tell).
func (d *dialect) Find(ctx context.Context, x *sshbatch.Exec, gridID string) ([]sshbatch.Found, error) {
	if x.User == "" {
		return nil, fmt.Errorf("%w: %s: looking jobs up by tag needs the login user (ssh.user)", backends.ErrInvalidSpec, x.Site)
	}
	r, err := x.Output(ctx, d.cmds.FindArgv(x.User, d.remote(), gridID))
	if err != nil {
		return nil, err
	}
	listing, idFiles, err := SplitFind(r.Stdout)
	if err != nil {
		return nil, err
	}
	ts, err := mine(listing, x.User)
	if err != nil {
		return nil, err
	}
	parent, index, attempt, isElem := backends.ArrayElement(gridID)
	arrayTag := ""
	if isElem {
		arrayTag = sshbatch.ArrayTag(parent, attempt)
	}
	dirs := map[backends.JobID]string{}
	var ids []backends.JobID
	for _, t := range ts {
		switch {
		case t.Tag == GridTag(gridID):
			id := backends.JobID(t.Number)
			dirs[id] = t.Cwd
			ids = append(ids, id)
		case isElem && t.Tag == arrayTag && t.Tasks.Has(index+1):
			id := TaskID(t.Number, index+1)
			dirs[id] = path.Join(t.Cwd, gridID) // the array runs from the directory holding the job directories
			ids = append(ids, id)
		}
	}
	for dir, id := range ParseIDFiles(idFiles) {
		if !strings.HasPrefix(dir, "gridsub/") || !sshbatch.DirBelongs(dir, gridID) {
			continue
		}
		if _, ok := dirs[id]; !ok {
			ids = append(ids, id)
		}
		dirs[id] = path.Join(d.remote(), dir)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	sort.Slice(ids, func(i, k int) bool { return lessID(string(ids[i]), string(ids[k])) })
	sts, err := d.poll(ctx, x, ids)
	if err != nil {
		return nil, err
	}
	var out []sshbatch.Found
	for _, id := range ids {
		st, ok := sts[id]
		if !ok {
			out = append(out, sshbatch.Found{Status: backends.JobStatus{ID: id}, Dir: dirs[id], Gone: true})
			continue
		}
		out = append(out, sshbatch.Found{Status: st, Dir: dirs[id]})
	}
	return out, nil
}

// lessID orders job numbers, then tasks: 9 < 10 < 10.2 < 10.10.
func lessID(a, b string) bool {
	aj, at, _ := strings.Cut(a, ".")
	bj, bt, _ := strings.Cut(b, ".")
	x, _ := strconv.ParseUint(aj, 10, 64)
	y, _ := strconv.ParseUint(bj, 10, 64)
	if x != y {
		return x < y
	}
	xt, _ := strconv.ParseUint(at, 10, 64)
	yt, _ := strconv.ParseUint(bt, 10, 64)
	return xt < yt
}

// Info reports the site from one command (InfoArgv): nodes are the
// configured queue's slots (every queue's, with none configured) divided
// by the slots per node; a node's memory is the smallest host's memory
// per slot times the slots per node.
func (d *dialect) Info(ctx context.Context, x *sshbatch.Exec) (*backends.SiteInfo, error) {
	r, err := x.Output(ctx, d.cmds.InfoArgv())
	if err != nil {
		return nil, err
	}
	return ParseInfo(r.Stdout, d.cfg.Name, d.cfg.Queue, d.cfg.SlotsPerNode)
}

// ParseInfo reads infoScript's output into the site's description (see
// Info).
func ParseInfo(out []byte, site, queue string, slotsPerNode int) (*backends.SiteInfo, error) {
	cut := func(b []byte, mark string) ([]byte, []byte, error) {
		a, rest, ok := bytes.Cut(b, []byte("\n"+mark+"\n"))
		if !ok {
			return nil, nil, sshbatch.BadOutput("qhost/qstat", out, "no "+mark+" line")
		}
		return a, rest, nil
	}
	hx, rest, err := cut(out, queuesMark)
	if err != nil {
		return nil, err
	}
	qx, rest, err := cut(rest, slotsMark)
	if err != nil {
		return nil, err
	}
	gx, jx, err := cut(rest, jobsMark)
	if err != nil {
		return nil, err
	}
	hosts, err := ParseQhostXML(hx)
	if err != nil {
		return nil, err
	}
	queues, err := ParseQueueList(qx)
	if err != nil {
		return nil, err
	}
	cqs, err := ParseClusterQueues(gx)
	if err != nil {
		return nil, err
	}
	jobs, err := ParseQstatXML(jx)
	if err != nil {
		return nil, err
	}
	if len(queues) == 0 {
		return nil, fmt.Errorf("%w: %s has no cluster queue (qconf -sql)", backends.ErrUnavailable, site)
	}
	if queue != "" {
		found := false
		for i, q := range queues {
			if q == queue {
				queues[0], queues[i] = queues[i], queues[0]
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: %s has no queue %q (qconf -sql lists %s)", backends.ErrRejected, site, queue, strings.Join(queues, ", "))
		}
	}
	spn := max(slotsPerNode, 1)
	var total, avail int
	for _, c := range cqs {
		if queue == "" || c.Name == queue {
			total += max(c.Total-c.Unavailable, 0)
			avail += c.Avail
		}
	}
	info := &backends.SiteInfo{Name: site, Kind: Kind, Nodes: total / spn, FreeNodes: min(avail/spn, total/spn), CoresPerNode: spn, Partitions: queues}
	var memPerSlot int64
	for _, h := range hosts {
		if h.MemTotal > 0 {
			m := h.MemTotal / int64(h.NCPU)
			if memPerSlot == 0 || m < memPerSlot {
				memPerSlot = m
			}
		}
	}
	info.MemPerNode = memPerSlot * int64(spn)
	for i := range jobs {
		if strings.ContainsAny(jobs[i].State, "rt") {
			info.Running++
		} else {
			info.Queued += jobs[i].Count()
		}
	}
	return info, nil
}

var userRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9._-]{0,63}$`)

// Reserve asks qrsub for the slots of rs.Nodes nodes in the site's queue
// and reads the reservation back (qrstat). qrsub decides at once: a
// reservation it cannot place is refused ("no suitable queues").
func (d *dialect) Reserve(ctx context.Context, x *sshbatch.Exec, rs *backends.ReservationSpec) (*backends.Reservation, error) {
	for _, u := range rs.Users {
		if !userRe.MatchString(u) {
			return nil, fmt.Errorf("%w: reservation user %q is not a user name (qrsub -u takes a comma-separated list)", backends.ErrInvalidSpec, u)
		}
	}
	slots := rs.Nodes * d.cfg.SlotsPerNode
	if slots > 1 && d.cfg.PE == "" {
		return nil, fmt.Errorf("%w: %s has no parallel environment configured (plugin.options.pe): it reserves one slot at most", backends.ErrInvalidSpec, d.cfg.Name)
	}
	start := rs.Start
	if !start.After(d.cfg.Now()) {
		start = time.Time{}
	}
	argv := d.cmds.QrsubArgv(rs.Name, start, d.cfg.Location, rs.Duration, slots, d.cfg.PE, d.cfg.Queue, rs.Users)
	r, err := x.Output(ctx, argv)
	if err != nil {
		return nil, err
	}
	id, err := ParseQrsub(r.Stdout)
	if err != nil {
		return nil, err
	}
	res, err := d.Show(ctx, x, id)
	if err != nil {
		return &backends.Reservation{ID: id}, err
	}
	return res, nil
}

// Show reads one reservation (qrstat -ar ID -xml); one qrstat does not
// know is ErrRejected.
func (d *dialect) Show(ctx context.Context, x *sshbatch.Exec, id backends.ResvID) (*backends.Reservation, error) {
	if !validResvID(string(id)) {
		return nil, fmt.Errorf("%w: %q is not a Grid Engine advance reservation number", backends.ErrRejected, id)
	}
	r, err := x.Output(ctx, d.cmds.QrstatArgv(id))
	if err != nil {
		return nil, err
	}
	ars, unknown, err := ParseQrstat(r.Stdout, d.cfg.Location)
	if err != nil {
		return nil, err
	}
	for _, a := range ars {
		if a.ID == string(id) {
			d.mu.Lock()
			d.ends[id] = a.End
			d.mu.Unlock()
			return &backends.Reservation{ID: id, Start: a.Start, End: a.End, Nodes: a.Slots / d.cfg.SlotsPerNode,
				NodeList: strings.Join(a.Instances, ","), State: a.State}, nil
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w: %s has no advance reservation %s", backends.ErrRejected, d.cfg.Name, id)
	}
	return nil, sshbatch.BadOutput("qrstat -xml", r.Stdout, "reservation "+string(id)+" neither shown nor unknown")
}

// Delete removes one reservation; one qrdel does not know is no error.
func (d *dialect) Delete(ctx context.Context, x *sshbatch.Exec, id backends.ResvID) error {
	if !validResvID(string(id)) {
		return nil
	}
	argv := d.cmds.QrdelArgv(id)
	r, err := x.Run(ctx, argv, nil)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 && !goneRe.MatchString(Message(r)) {
		return x.Fail(argv, r)
	}
	return nil
}
