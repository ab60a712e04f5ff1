package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// ledger is the one owner of job state: every job the broker knows, the
// global queue and the policy's view of it, the live list, the indices
// (remote job -> grid job, held jobs, group parents, reserved jobs, jobs
// to reconcile), the job events waiting for Options.OnEvent, and the
// writes to the Store. Its lock, mu, guards all of it; the site table's
// per-site observations and the features' bookkeeping are guarded by the
// same lock, so that one transition sees one consistent state. writeMu,
// taken after mu, orders the store writes of one job (ledger_writes.go).
//
// Features and stages change a job and record the change only through
// the ledger's transitions, which never do remote I/O and, but for
// putNew, are called with mu held. Those that record: transition (a
// state and its event), endAs and requeueAs (an ending or a requeue with
// its event), note (an event within a change), record and commit (an
// event and its write), save and saveLater (the write that closes a
// change), putNew and announce (a new job). Those that keep the queue,
// the live list and the indices in step with the jobs' states: add,
// queueLast, enqueue, dequeue, requeue, waitReserved, goLive, adopt,
// unlive, index, forget, unindex, compactLive, markRestarted, dropEnded.
// The rule every recording transition keeps: a change is written to the
// Store before anything acts on it (a submission, a cancel, a reply), and
// a job's writes reach the Store in the order they were made. Only the
// ledger's own files call its helpers addEvent and persist
// (TestOnlyTheLedgerRecords).
type ledger struct {
	mu      sync.Mutex
	jobs    map[string]*Job    // every job the broker knows, live or ended
	queue   []string           // ids of queued jobs in FCFS order
	pq      []policy.Job       // the policy's view of queue, kept in step with it
	byNow   []policy.Job       // reused by submittedBy when some queued jobs are too new for a cycle
	live    []string           // ids of dispatched or running jobs, in dispatch order
	where   map[compKey]string // remote job at a site -> grid job id, for live components
	ended   []string           // ids of jobs that ended since the last output fetch
	toDrop  []string           // ids of jobs that ended, for Options.Drop
	held    []string           // ids of Held jobs
	parents []string           // ids of unfinished group parents
	groups  map[string]*groupInfo
	// reserved are the ids of Reserved jobs (may hold stale ones; pruned
	// at binding).
	reserved []string
	// unresolved are Submitting jobs whose site could not be asked at Recover.
	unresolved []string
	// restarted are the jobs Recover found Submitting: their intents were
	// written by an earlier process, whose commands may still be landing
	// (Options.SubmitGrace applies to them only; recover.go).
	restarted map[string]bool
	// unreachable: queued jobs held out of planning because every site
	// they may use is down (unreachable.go).
	unreachable map[string]bool
	pending     []pendingEvent // events to hand to OnEvent once the lock is released
	// unwritten, with checkWrites: the jobs with an event added and not
	// written since, each with that event's kind.
	unwritten map[*Job]string

	group   *writeGroup // a cycle phase's writes, flushed together (ledger_writes.go)
	writeMu sync.Mutex  // orders job writes: persist and writeCopies (ledger_writes.go); taken after mu
	store   Store
	log     *slog.Logger

	// used is each user's accounted use (usage.go): the charges of the
	// jobs that ended, loaded from the Store at Recover; owner and
	// halfLife say whose each job is and how fast use decays.
	used     map[string]UserUse
	owner    func(*Request) string
	halfLife time.Duration

	noHistory bool              // Options.NoHistory
	onEvent   func(*Job, Event) // Options.OnEvent
	drop      func(*Job)        // Options.Drop

	st *siteTable // site indices of components (where), and the policy's view of a job
}

func newLedger(opts *Options, st *siteTable, log *slog.Logger) *ledger {
	l := &ledger{jobs: map[string]*Job{}, where: map[compKey]string{}, groups: map[string]*groupInfo{},
		store: opts.Store, log: log, noHistory: opts.NoHistory, onEvent: opts.OnEvent, drop: opts.Drop, st: st,
		used: map[string]UserUse{}, owner: opts.ownerOf, halfLife: opts.FairShareHalfLife}
	if l.store == nil {
		l.store = NewMemStore()
	}
	return l
}

type pendingEvent struct {
	job *Job
	ev  Event
}

// addEvent appends an event to the job and holds it for OnEvent, with a
// copy of the job as it is now. A helper of the transitions below; the
// ledger's lock held.
func (l *ledger) addEvent(j *Job, t time.Time, kind, site, msg string) {
	if l.noHistory {
		return
	}
	e := Event{Time: t, Kind: kind, Site: site, Msg: msg}
	j.Events = append(j.Events, e)
	if checkWrites {
		if l.unwritten == nil {
			l.unwritten = map[*Job]string{}
		}
		l.unwritten[j] = kind
	}
	if l.onEvent != nil {
		l.pending = append(l.pending, pendingEvent{j.Clone(), e})
	}
}

// checkWrites, set by the package's tests, makes flushEvents panic when
// an operation ends with an event added to a job that was not written
// since: the contract of note, transition, endAs and requeueAs, whose
// caller closes the change with a write.
var checkWrites bool

// written records that j was written, or handed to a write, as it is now
// (checkWrites). The ledger's lock held.
func (l *ledger) written(j *Job) {
	if checkWrites {
		delete(l.unwritten, j)
	}
}

// flushEvents hands the events added since the last flush to OnEvent.
// Called once an operation (Submit, Cycle, Cancel, Recover, binding) has
// let the ledger's lock go.
func (l *ledger) flushEvents() {
	if l.onEvent == nil && !checkWrites {
		return
	}
	l.mu.Lock()
	var lost []string
	for j, kind := range l.unwritten {
		lost = append(lost, j.ID+" ("+kind+")")
	}
	clear(l.unwritten)
	p := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(lost) > 0 {
		slices.Sort(lost)
		panic("bridge: events added and never written: " + strings.Join(lost, ", "))
	}
	for _, e := range p {
		l.onEvent(e.job, e.ev)
	}
}

// note adds an event to a change the caller is making to j, at this
// point of it: OnEvent sees the job as it is now. The event is not
// written by itself: the caller closes the change with save, saveLater,
// record or commit under the same hold of the lock, before anything acts
// on it. The ledger's lock held.
func (l *ledger) note(j *Job, t time.Time, kind, site, msg string) {
	l.addEvent(j, t, kind, site, msg)
}

// transition moves j to the state to, with the event (at site, "" for
// none) that says why, noted as by note. The caller puts the job where
// the state wants it (queueLast, enqueue, adopt, goLive) and closes the
// change (save, saveLater). For an ending see endAs. The ledger's lock
// held.
func (l *ledger) transition(j *Job, to JobState, now time.Time, kind, site, msg string) {
	j.State = to
	l.addEvent(j, now, kind, site, msg)
}

// record adds an event to j and writes j at once, for a change the caller
// does not act on further: a failed write is logged (persist) and not
// returned. The ledger's lock held.
func (l *ledger) record(ctx context.Context, j *Job, t time.Time, kind, site, msg string) {
	l.addEvent(j, t, kind, site, msg)
	_ = l.persist(ctx, j)
}

// commit adds an event to j and writes j at once, returning the write's
// error: the write-ahead record of a change the caller acts on next (a
// dispatch intent, a move, a binding). On an error the caller undoes the
// change in memory and does not act on it; the failure is logged. The
// ledger's lock held.
func (l *ledger) commit(ctx context.Context, j *Job, t time.Time, kind, site, msg string) error {
	l.addEvent(j, t, kind, site, msg)
	return l.persist(ctx, j)
}

// save writes j at once, as it is now — its fields and every event noted
// since its last write — and closes the change the caller made. A failure
// is logged and returned: the caller must not act on a change it could
// not record. The ledger's lock held.
func (l *ledger) save(ctx context.Context, j *Job) error {
	return l.persist(ctx, j)
}

// putNew writes a new job that is not in the ledger yet (Submit, a
// group's parent), before add takes it in: nobody else sees the job, so
// the ledger's lock is not held, and concurrent submissions share the
// store's commits. Its error is returned, not logged: the job is not
// taken in.
func (l *ledger) putNew(ctx context.Context, j *Job) error {
	if checkWrites {
		l.mu.Lock()
		l.written(j)
		l.mu.Unlock()
	}
	return l.store.Put(ctx, j)
}

// announce hands an event already in a new job's history to OnEvent, with
// a copy of the job as it is now (Submit, whose first events are written
// with the job by putNew). The ledger's lock held.
func (l *ledger) announce(j *Job, e Event) {
	if l.onEvent != nil {
		l.pending = append(l.pending, pendingEvent{j.Clone(), e})
	}
}

// persist writes the job; a helper of the writing transitions (record,
// commit, save, saveLater, with the grouped writes of ledger_writes.go)
// that hands an ended job to Options.Drop later. The ledger's lock held.
// A store failure is logged and returned.
func (l *ledger) persist(ctx context.Context, j *Job) error {
	if l.drop != nil && j.State.Final() && j.final == nil {
		l.toDrop = append(l.toDrop, j.ID)
	}
	l.written(j)
	c := l.chargeOf(j)
	l.writeMu.Lock()
	err := l.put(ctx, j, c)
	l.writeMu.Unlock()
	if err != nil {
		l.log.Error("store write failed", "job", j.ID, "err", err)
		return err
	}
	return nil
}

// chargeOf is the charge of j's run to its owner's accounted use once j
// is final (nil for a job that is not, that never ran, or that is a
// group's parent, whose elements are charged each for its own run): its
// nodes from Start to End, decayed to End. The first time it sees j final it adds
// the charge to the ledger's account (used); the Store adds it to its own
// when it first stores j final (UsageStore), so every later write may
// carry it again. The ledger's lock held.
func (l *ledger) chargeOf(j *Job) *Charge {
	if !j.State.Final() || j.Start.IsZero() || !j.End.After(j.Start) || j.Group != nil {
		return nil
	}
	c := &Charge{User: l.owner(&j.Req), NodeSeconds: ChargeOf(j.Req.Nodes, j.Start, j.End, l.halfLife), At: j.End, HalfLife: l.halfLife}
	if !j.charged {
		j.charged = true
		l.used[c.User] = l.used[c.User].Add(*c)
	}
	return c
}

// put writes j to the Store, with its charge (chargeOf) when it has one
// and the Store keeps the users' use (UsageStore). A helper of persist and
// putAll; the ledger's lock need not be held (j is not changed meanwhile).
func (l *ledger) put(ctx context.Context, j *Job, c *Charge) error {
	if c != nil {
		if us, ok := l.store.(UsageStore); ok {
			return us.PutCharged(ctx, j, *c)
		}
	}
	return l.store.Put(ctx, j)
}

// accounted is the users' accounted use as the queue order reads it,
// sorted by user. The ledger's lock held.
func (l *ledger) accounted() []policy.AccountedUse {
	out := make([]policy.AccountedUse, 0, len(l.used))
	for u, x := range l.used {
		out = append(out, policy.AccountedUse{User: u, NodeSeconds: x.NodeSeconds, At: x.At})
	}
	slices.SortFunc(out, func(a, b policy.AccountedUse) int { return strings.Compare(a.User, b.User) })
	return out
}

// loadUsage takes the users' accounted use from the Store (Recover): a
// Store that cannot give it is logged, and the use counted from then on
// only. The ledger's lock held.
func (l *ledger) loadUsage(ctx context.Context) {
	us, ok := l.store.(UsageStore)
	if !ok {
		return
	}
	used, err := us.Usage(ctx)
	if err != nil {
		l.log.Error("reading the users' accounted use failed: fair share counts only the use from now on", "err", err)
		return
	}
	for u, x := range used {
		l.used[u] = x
	}
}

// dropEnded hands the jobs that ended to Options.Drop and forgets them.
// Called last in a cycle (or cancel), once nothing refers to them any more.
func (l *ledger) dropEnded() {
	if l.drop == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.toDrop) == 0 {
		return
	}
	// Every path that ends a live job compacts the live list itself.
	for _, id := range l.toDrop {
		if j, ok := l.jobs[id]; ok && j.State.Final() && j.final == nil {
			l.drop(j)
			delete(l.jobs, id)
		}
	}
	l.toDrop = l.toDrop[:0]
}

// requeue puts a job whose attempt was lost back at its FCFS place. The ledger's lock held.
func (l *ledger) requeue(j *Job, now time.Time, why string) {
	again := "queued again"
	if j.Resv != nil && j.Resv.State == ResvBound {
		again = "submitted into its reservation again"
	}
	l.requeueAs(j, now, "requeued", fmt.Sprintf("attempt %d lost: %s; %s", j.Attempts, why, again))
}

// requeueAs puts a job back at its FCFS place with an event of the given
// kind, noted as by note — or, for a job in its bound reservation, back to
// wait for it. The caller closes the change (save, saveLater). The
// ledger's lock held.
func (l *ledger) requeueAs(j *Job, now time.Time, kind, msg string) {
	l.unindex(j)
	j.Comps = nil
	l.addEvent(j, now, kind, "", msg)
	if j.Resv != nil && j.Resv.State == ResvBound {
		l.waitReserved(j)
		return
	}
	j.State = Queued
	l.enqueue(j)
}

// index records that component c of job id runs at its site under its
// remote id, for the poll stage to find. The ledger's lock held.
func (l *ledger) index(id string, c Component) {
	l.where[compKey{l.st.siteIdx[c.Site], c.RemoteID}] = id
}

// forget drops component c from the index (index). The ledger's lock held.
func (l *ledger) forget(c Component) {
	delete(l.where, compKey{l.st.siteIdx[c.Site], c.RemoteID})
}

// goLive makes a job whose components were submitted live: Dispatched,
// out of the queue, last in the live list. Its components are indexed by
// the caller (index). The ledger's lock held.
func (l *ledger) goLive(j *Job) {
	j.State = Dispatched
	if strings.HasPrefix(j.Reason, PreemptedReason) {
		j.Reason = "" // it runs again
	}
	l.dequeue(j.ID)
	l.live = append(l.live, j.ID)
}

// unindex forgets the components of a job that left the live set. The ledger's lock held.
func (l *ledger) unindex(j *Job) {
	for _, c := range j.Comps {
		l.forget(c)
	}
}

// compactLive drops ended or requeued jobs from the live list. The ledger's lock held.
func (l *ledger) compactLive() {
	l.live = slices.DeleteFunc(l.live, func(id string) bool {
		j := l.jobs[id]
		if j == nil {
			return true // dropped (Options.Drop)
		}
		if j.State == Dispatched || j.State == Running {
			return false
		}
		l.unindex(j)
		return true
	})
}

// submittedBy is the policy's view of the queue without the jobs submitted
// after now, pq itself (capped) when there are none. Called with the ledger's lock held.
func (l *ledger) submittedBy(now time.Time) []policy.Job {
	late := slices.IndexFunc(l.pq, func(j policy.Job) bool { return j.Submit.After(now) })
	if late < 0 {
		return l.pq[:len(l.pq):len(l.pq)]
	}
	l.byNow = append(l.byNow[:0], l.pq[:late]...)
	for _, j := range l.pq[late+1:] {
		if !j.Submit.After(now) {
			l.byNow = append(l.byNow, j)
		}
	}
	return l.byNow[:len(l.byNow):len(l.byNow)]
}

// add takes a new job, already stored, into the ledger: a queued job at
// the end of the queue, a held one among the held, one waiting for its
// reservation among the reserved. The ledger's lock held.
func (l *ledger) add(j *Job) {
	l.jobs[j.ID] = j
	switch j.State {
	case Queued:
		l.queueLast(j)
	case Held:
		l.held = append(l.held, j.ID)
	case Reserved:
		l.reserved = append(l.reserved, j.ID)
	}
}

// queueLast puts a new (or newly released) queued job at the end of the
// queue: FCFS, as it was submitted (or released) last. mu held.
func (l *ledger) queueLast(j *Job) {
	l.queue = append(l.queue, j.ID)
	l.pq = append(l.pq, l.st.policyJob(j))
}

// endAs ends a job that did not run to its end at a site — Failed,
// Rejected or Cancelled by the broker — with why as its reason and the
// event kind (at site, "" for none) saying so, noted as by note. The
// caller takes it out of the queue or the live list, and closes the
// change (save, saveLater). mu held.
func (l *ledger) endAs(j *Job, now time.Time, state JobState, kind, site, why string) {
	j.State, j.Reason, j.End = state, why, now
	l.addEvent(j, now, kind, site, why)
}

// markRestarted records that j's intents were written by the process
// before the restart (Options.SubmitGrace applies to them). The ledger's lock held.
func (l *ledger) markRestarted(j *Job) {
	if l.restarted == nil {
		l.restarted = map[string]bool{}
	}
	l.restarted[j.ID] = true
}

// adopt makes a dispatched or running job live again. The ledger's lock held.
func (l *ledger) adopt(j *Job) {
	l.live = append(l.live, j.ID)
	for _, c := range j.Comps {
		if c.RemoteID != "" {
			l.index(j.ID, c)
		}
	}
}

// unlive takes a job held for reconciliation out of the live set: a live
// job found at Recover with an intent not settled yet is tracked again only
// once its sites answered (retryUnresolved, reconcileCopies). Recover has
// just appended it to the live list (adopt). A Submitting job is left as it is.
// The ledger's lock held.
func (l *ledger) unlive(j *Job) {
	if j.State == Submitting {
		return
	}
	l.live = l.live[:len(l.live)-1]
	l.unindex(j)
	j.State = Submitting
}

// enqueue puts a queued job at its FCFS place in the queue (by submission
// time, then id). The ledger's lock held.
func (l *ledger) enqueue(j *Job) {
	pos, _ := slices.BinarySearchFunc(l.queue, j, func(id string, t *Job) int {
		q := l.jobs[id]
		if c := q.Submit.Compare(t.Submit); c != 0 {
			return c
		}
		return strings.Compare(q.ID, t.ID)
	})
	l.queue = slices.Insert(l.queue, pos, j.ID)
	l.pq = slices.Insert(l.pq, pos, l.st.policyJob(j))
}

// waitReserved puts a job back to wait for (or inside) its reservation.
// The ledger's lock held.
func (l *ledger) waitReserved(j *Job) {
	j.State = Reserved
	if !slices.Contains(l.reserved, j.ID) {
		l.reserved = append(l.reserved, j.ID)
	}
}

// dequeue removes a job from the global queue. The ledger's lock held.
func (l *ledger) dequeue(id string) {
	if i := slices.Index(l.queue, id); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
		l.pq = slices.Delete(l.pq, i, i+1)
	}
}
