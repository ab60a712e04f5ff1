package simbackend

import (
	"fmt"
	"sort"
)

// EASYOptions configure the single-site EASY backfilling scheduler.
type EASYOptions struct {
	// ReferenceCompatible reproduces the pyss EasyBackfillScheduler used for
	// the reference CTC-SP2 schedule rule for rule (see doc.go). gridsub's
	// default differs in two places: job ends at an instant are handled
	// before submissions at that instant (so nodes freed at t serve a job
	// submitted at t), and every submission triggers a scheduling pass.
	ReferenceCompatible bool
}

// sjob is one job as the EASY core sees it. Times are integers in the
// caller's unit (nanoseconds for a Site on the engine clock; the replay
// passes seconds scaled to nanoseconds, so the arithmetic stays integral).
type sjob struct {
	width    int
	est      int64 // estimate: the job holds its nodes on [start, start+est)
	start    int64
	estEnd   int64
	startSeq uint64
	resv     *resvState // nil for ordinary jobs
	queued   bool
	running  bool
	owner    any // the Site's or the replay's record
}

// resvState is an advance reservation inside the core: nodes held over
// [start, end) for the jobs submitted into it.
type resvState struct {
	start, end int64
	nodes      int
	inUse      int
	queue      []*sjob
	owner      any
}

// easy is the one EASY backfilling scheduler of the package. Sites and the
// trace replay both drive it through submit / end / cancel; it calls onStart
// for each job it starts and the caller schedules that job's end.
//
// Ordinary jobs: an FCFS queue; a pass starts queue heads while they fit,
// then, if two or more jobs still wait, reserves the head at its shadow time
// and scans the rest once, starting any job that fits now without delaying
// the head. Running jobs are kept sorted by estimated end (a running job
// holds its nodes until start+estimate, or until its end is handled), so the
// shadow time is one walk over at most Nodes entries. While no advance
// reservation is pending or active, a pass is O(queue + running) with no
// allocation; with reservations it works on an explicit availability
// profile instead (same rules, windows checked over the whole estimate).
type easy struct {
	total   int
	opts    EASYOptions
	queue   []*sjob // FCFS; entries with queued=false are skipped and compacted
	running []*sjob // ordinary running jobs sorted by (estEnd, startSeq)
	used    int     // nodes of ordinary running jobs
	resvs   []*resvState
	seq     uint64
	onStart func(j *sjob, now int64)
}

func newEASY(total int, opts EASYOptions, onStart func(*sjob, int64)) *easy {
	return &easy{total: total, opts: opts, onStart: onStart}
}

// submit queues j at now and runs a pass (in reference mode only when j fits
// in the nodes free now: rule 4).
func (s *easy) submit(j *sjob, now int64) {
	j.queued = true
	if r := j.resv; r != nil {
		r.queue = append(r.queue, j)
		s.passResv(r, now)
		return
	}
	s.queue = append(s.queue, j)
	if s.opts.ReferenceCompatible && j.width > s.freeNow(now) {
		return
	}
	s.pass(now)
}

// end handles the end of running job j at now: its nodes (the unused tail of
// its estimate) are released and a pass runs (one per end: rule 5).
func (s *easy) end(j *sjob, now int64) {
	s.release(j)
	s.pass(now)
}

// release frees j's nodes without a pass.
func (s *easy) release(j *sjob) {
	if !j.running {
		return
	}
	j.running = false
	if r := j.resv; r != nil {
		r.inUse -= j.width
		return
	}
	i := sort.Search(len(s.running), func(i int) bool { return s.running[i].estEnd >= j.estEnd })
	for ; i < len(s.running); i++ {
		if s.running[i] == j {
			copy(s.running[i:], s.running[i+1:])
			s.running[len(s.running)-1] = nil
			s.running = s.running[:len(s.running)-1]
			s.used -= j.width
			return
		}
	}
	panic("simbackend: running job missing from the running list")
}

// dequeue removes a waiting job (cancelled) and runs a pass, since the head
// may have changed.
func (s *easy) dequeue(j *sjob, now int64) {
	if !j.queued {
		return
	}
	j.queued = false
	if r := j.resv; r != nil {
		r.queue = compact(r.queue)
		return
	}
	s.queue = compact(s.queue)
	s.pass(now)
}

func compact(q []*sjob) []*sjob {
	k := 0
	for _, j := range q {
		if j.queued {
			q[k] = j
			k++
		}
	}
	clear(q[k:])
	return q[:k]
}

// start marks j running from now and tells the owner.
func (s *easy) start(j *sjob, now int64) {
	j.queued = false
	j.running = true
	j.start = now
	j.estEnd = now + j.est
	s.seq++
	j.startSeq = s.seq
	if r := j.resv; r != nil {
		if j.estEnd > r.end {
			j.estEnd = r.end
		}
		r.inUse += j.width
	} else {
		// Insert after every entry with the same or an earlier estimated end.
		i := sort.Search(len(s.running), func(i int) bool { return s.running[i].estEnd > j.estEnd })
		s.running = append(s.running, nil)
		copy(s.running[i+1:], s.running[i:])
		s.running[i] = j
		s.used += j.width
	}
	s.onStart(j, now)
}

// freeNow is the number of nodes free at now for ordinary jobs when no
// reservation is pending: a running job whose estimate ran out at or before
// now no longer holds nodes even if its end is not handled yet (rule 2).
func (s *easy) freeNow(now int64) int {
	free := s.total - s.used
	for _, r := range s.running {
		if r.estEnd > now {
			break
		}
		free += r.width
	}
	for _, r := range s.resvs {
		if r.start <= now && now < r.end {
			free -= r.nodes
		}
	}
	return free
}

func (s *easy) hasResv(now int64) bool {
	for _, r := range s.resvs {
		if r.end > now {
			return true
		}
	}
	return false
}

// pass is one scheduling pass for ordinary jobs (rule 6), after starting
// whatever the active reservations can take.
func (s *easy) pass(now int64) {
	for _, r := range s.resvs {
		s.passResv(r, now)
	}
	if len(s.queue) == 0 {
		return
	}
	if s.hasResv(now) {
		s.passProfile(now)
		return
	}
	free := s.freeNow(now)
	// Heads in FCFS order while they fit now.
	h := 0
	for h < len(s.queue) && s.queue[h].width <= free {
		j := s.queue[h]
		free -= j.width
		s.start(j, now)
		h++
	}
	if h > 0 {
		n := copy(s.queue, s.queue[h:])
		clear(s.queue[n:])
		s.queue = s.queue[:n]
	}
	if len(s.queue) < 2 {
		return
	}
	// Shadow time of the head and the extra nodes at that time.
	head := s.queue[0]
	avail := free
	shadow, extra := int64(-1), 0
	for i, r := range s.running {
		if r.estEnd <= now {
			continue // already counted in free
		}
		avail += r.width
		if avail >= head.width && (i+1 == len(s.running) || s.running[i+1].estEnd != r.estEnd) {
			shadow, extra = r.estEnd, avail-head.width
			break
		}
	}
	if shadow < 0 {
		panic(fmt.Sprintf("simbackend: head job of width %d can never fit in %d nodes", head.width, s.total))
	}
	// One FCFS scan of the rest: a job starts if it fits now and either ends
	// (by its estimate) by the shadow time or fits in the extra nodes.
	k := 1
	for _, j := range s.queue[1:] {
		if free == 0 {
			s.queue[k] = j
			k++
			continue
		}
		if j.width <= free {
			if now+j.est <= shadow {
				free -= j.width
				s.start(j, now)
				continue
			}
			if j.width <= extra {
				free -= j.width
				extra -= j.width
				s.start(j, now)
				continue
			}
		}
		s.queue[k] = j
		k++
	}
	clear(s.queue[k:])
	s.queue = s.queue[:k]
}

// passResv starts the jobs of an active reservation that fit in its free
// nodes, first-fit in submission order.
func (s *easy) passResv(r *resvState, now int64) {
	if now < r.start || now >= r.end || len(r.queue) == 0 {
		return
	}
	k := 0
	for _, j := range r.queue {
		if j.width <= r.nodes-r.inUse {
			s.start(j, now)
			continue
		}
		r.queue[k] = j
		k++
	}
	clear(r.queue[k:])
	r.queue = r.queue[:k]
}

// --- availability profile, used while advance reservations exist ---

// seg is a step of the availability profile: free nodes from t until the
// next step.
type seg struct {
	t    int64
	free int
}

type profile []seg

// buildProfile is the free-node profile for ordinary jobs from now on:
// ordinary running jobs until their estimated ends, reservations over their
// windows (whatever their own jobs use is inside them).
func (s *easy) buildProfile(now int64) profile {
	type delta struct {
		t int64
		d int
	}
	free := s.total
	var ds []delta
	for _, r := range s.running {
		if r.estEnd > now {
			free -= r.width
			ds = append(ds, delta{r.estEnd, r.width})
		}
	}
	for _, r := range s.resvs {
		if r.end <= now {
			continue
		}
		if r.start <= now {
			free -= r.nodes
		} else {
			ds = append(ds, delta{r.start, -r.nodes})
		}
		ds = append(ds, delta{r.end, r.nodes})
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a].t < ds[b].t })
	p := profile{{now, free}}
	for _, d := range ds {
		free += d.d
		if p[len(p)-1].t == d.t {
			p[len(p)-1].free = free
		} else {
			p = append(p, seg{d.t, free})
		}
	}
	return p
}

// minFree is the least free count over [t0, t1).
func (p profile) minFree(t0, t1 int64) int {
	m := int(^uint(0) >> 1)
	for i, sg := range p {
		end := int64(1<<63 - 1)
		if i+1 < len(p) {
			end = p[i+1].t
		}
		if end <= t0 {
			continue
		}
		if sg.t >= t1 {
			break
		}
		m = min(m, sg.free)
	}
	return m
}

func (p profile) fits(w int, t0, d int64) bool { return p.minFree(t0, t0+d) >= w }

// earliest is the first step time at which w nodes are free for d.
func (p profile) earliest(w int, d int64) (int64, bool) {
	for _, sg := range p {
		if p.fits(w, sg.t, d) {
			return sg.t, true
		}
	}
	return 0, false
}

// take removes w nodes over [t0, t0+d), splitting steps as needed.
func (p profile) take(w int, t0, d int64) profile {
	t1 := t0 + d
	p = p.split(t0)
	p = p.split(t1)
	for i := range p {
		if p[i].t >= t0 && p[i].t < t1 {
			p[i].free -= w
		}
	}
	return p
}

func (p profile) split(t int64) profile {
	i := sort.Search(len(p), func(i int) bool { return p[i].t >= t })
	if i < len(p) && p[i].t == t || i == 0 {
		return p
	}
	p = append(p, seg{})
	copy(p[i+1:], p[i:])
	p[i] = seg{t, p[i-1].free}
	return p
}

// passProfile is pass with the availability profile: the same rules, but a
// job must fit over its whole estimate, since a reservation may begin
// before it would end.
func (s *easy) passProfile(now int64) {
	p := s.buildProfile(now)
	h := 0
	for h < len(s.queue) && p.fits(s.queue[h].width, now, s.queue[h].est) {
		j := s.queue[h]
		p = p.take(j.width, now, j.est)
		s.start(j, now)
		h++
	}
	if h > 0 {
		n := copy(s.queue, s.queue[h:])
		clear(s.queue[n:])
		s.queue = s.queue[:n]
	}
	if len(s.queue) < 2 {
		return
	}
	head := s.queue[0]
	shadow, ok := p.earliest(head.width, head.est)
	if !ok {
		panic(fmt.Sprintf("simbackend: head job of width %d can never fit in %d nodes", head.width, s.total))
	}
	p = p.take(head.width, shadow, head.est)
	k := 1
	for _, j := range s.queue[1:] {
		if p.fits(j.width, now, j.est) {
			p = p.take(j.width, now, j.est)
			s.start(j, now)
			continue
		}
		s.queue[k] = j
		k++
	}
	clear(s.queue[k:])
	s.queue = s.queue[:k]
}

// admit checks that n nodes are free for ordinary use over [start, end)
// given the running jobs' estimates and the other reservations.
func (s *easy) admit(start, end int64, n int, now int64) bool {
	if n > s.total {
		return false
	}
	return s.buildProfile(now).minFree(max(start, now), end) >= n
}

// adopt turns a running job of a deleted reservation into an ordinary
// running job (it keeps its nodes until its estimated end).
func (s *easy) adopt(j *sjob) {
	if !j.running || j.resv == nil {
		return
	}
	j.resv.inUse -= j.width
	j.resv = nil
	i := sort.Search(len(s.running), func(i int) bool { return s.running[i].estEnd > j.estEnd })
	s.running = append(s.running, nil)
	copy(s.running[i+1:], s.running[i:])
	s.running[i] = j
	s.used += j.width
}

func (s *easy) addResv(r *resvState) {
	s.resvs = append(s.resvs, r)
	sort.SliceStable(s.resvs, func(a, b int) bool { return s.resvs[a].start < s.resvs[b].start })
}

func (s *easy) removeResv(r *resvState) {
	for i, x := range s.resvs {
		if x == r {
			s.resvs = append(s.resvs[:i], s.resvs[i+1:]...)
			return
		}
	}
}
