package bridge

import (
	"log/slog"
	"sync"

	"github.com/gridsub/gridsub/policy"
)

// ledger is the one owner of job state: every job the broker knows, the
// global queue and the policy's view of it, the live list, the indices
// (remote job -> grid job, held jobs, group parents, reserved jobs, jobs
// to reconcile), the job events waiting for Options.OnEvent, and the
// writes to the Store. Its lock, mu, guards all of it; the site table's
// per-site observations and the features' bookkeeping are guarded by the
// same lock, so that one transition sees one consistent state. writeMu,
// taken after mu, orders the store writes of one job (persistgroup.go).
//
// The transition operations (addEvent, persist, persistLater, enqueue,
// dequeue, requeueAs, waitReserved, index, unindex, compactLive, adopt,
// unlive) keep the queue, the live list and the indices in step with the
// jobs' states; they are called with mu held and never do remote I/O.
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

	group   *writeGroup // a cycle phase's writes, flushed together (persistgroup.go)
	writeMu sync.Mutex  // orders job writes: persist and writeCopies (persistgroup.go); taken after mu
	store   Store
	log     *slog.Logger

	noHistory bool              // Options.NoHistory
	onEvent   func(*Job, Event) // Options.OnEvent
	drop      func(*Job)        // Options.Drop

	st *siteTable // site indices of components (where), and the policy's view of a job
}

func newLedger(opts *Options, st *siteTable, log *slog.Logger) *ledger {
	l := &ledger{jobs: map[string]*Job{}, where: map[compKey]string{}, groups: map[string]*groupInfo{},
		store: opts.Store, log: log, noHistory: opts.NoHistory, onEvent: opts.OnEvent, drop: opts.Drop, st: st}
	if l.store == nil {
		l.store = NewMemStore()
	}
	return l
}

type pendingEvent struct {
	job *Job
	ev  Event
}
