package drrmsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/policy/reserve"
)

// Mechanism names.
const (
	DRRM  = "DRRM"
	SRRMr = "SRRM_r"
	SRRMm = "SRRM_m"
)

// Mechanisms lists the mechanisms Run knows, in the paper's order.
func Mechanisms() []string { return []string{DRRM, SRRMr, SRRMm} }

// admissions maps the paper's mechanism names onto the built-in admission
// mechanisms (policy/reserve) that the broker's broker.admission names.
var admissions = map[string]string{
	DRRM:  reserve.DRRMName,       // the resource–reservation graph
	SRRMr: reserve.SRRMRandomName, // r_schedule: a random candidate with room
	SRRMm: reserve.SRRMName,       // m_schedule: the least predicted preemption cost
}

// newBook opens mechanism name's reservation book over res through the
// admission extension point, as the broker does; seed drives SRRM_r's
// random choices.
func newBook(name string, res []reserve.Resource, seed uint64) (policy.ReservationBook, error) {
	a, ok := admissions[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (valid: DRRM, SRRM_r, SRRM_m)", ErrMechanism, name)
	}
	adm, err := registry.Admission(a)
	if err != nil {
		return nil, err
	}
	return adm.NewBook(res, seed), nil
}

// Failure is one resource failing at T0 + Sigma·Horizon.
type Failure struct {
	Sigma    float64 // time ratio σ in (0, 1]
	Resource int     // index into World.Res
}

// DrawFailure picks the failing resource uniformly with its own seeded
// source, so that every mechanism of one seed loses the same resource.
func DrawFailure(w *World, sigma float64, seed uint64) Failure {
	r := rand.New(rand.NewPCG(seed, 0xfa11))
	return Failure{Sigma: sigma, Resource: r.IntN(len(w.Res))}
}

// Result is one mechanism's run over one world.
type Result struct {
	Requests   int      // requests that arrived
	Admitted   int      // passed the admission test
	Preempting int      // admitted reservations whose start preempted non-reserved jobs
	TPC        float64  // total preemption cost: Σ elapsed seconds of the preempted jobs (w = 1)
	Failed     int      // admitted reservations lost to the resource failure
	BindFailed int      // admitted reservations that could not be bound at their start
	Completed  int      // reservations that ran to their end
	AdmittedID []string // ids admitted, in arrival order
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// AP is the admission percentage (as a share in [0, 1]).
func (r Result) AP() float64 { return ratio(r.Admitted, r.Requests) }

// PP is the preemption percentage: reservations that preempted over those admitted.
func (r Result) PP() float64 { return ratio(r.Preempting, r.Admitted) }

// Eta is the reservation failure rate η: admitted reservations lost to the
// resource failure over those admitted.
func (r Result) Eta() float64 { return ratio(r.Failed, r.Admitted) }

// running lists the non-reserved job running on each live resource at t,
// except on resources a reservation holds at t. bg is the run's view of the
// non-reserved jobs (newBGView).
func (w *World) running(t time.Time, held map[string][]holdAt, dead int, bg *bgView) []reserve.Running {
	out := make([]reserve.Running, 0, len(w.Res))
	tn := t.UnixNano()
	for i, r := range w.Res {
		if i == dead {
			continue
		}
		busy := false
		for _, h := range held[r.Name] {
			busy = busy || (!h.start.After(t) && h.end.After(t))
		}
		if busy {
			continue
		}
		if k, ok := bg.at(i, tn); ok {
			j := w.BG[i][k]
			out = append(out, reserve.Running{Resource: r.Name, Job: bg.id(i, k, r.Name), Expected: j.Expected, Elapsed: t.Sub(j.Start)})
		}
	}
	return out
}

// bgView finds the non-reserved job running on a resource at an instant:
// each resource's jobs by end time (Unix nanoseconds), and per resource the
// last job found and its id, which the next, usually later or equal,
// instant starts from. One run owns one view.
type bgView struct {
	w     *World
	start [][]int64 // per resource, each job's start
	end   [][]int64 // per resource, each job's end (start + Len)
	last  []int     // per resource, the index last found
	ids   []string  // per resource, the id of BG[i][last[i]] ("" until made)
}

func newBGView(w *World) *bgView {
	v := &bgView{w: w, start: make([][]int64, len(w.BG)), end: make([][]int64, len(w.BG)),
		last: make([]int, len(w.BG)), ids: make([]string, len(w.BG))}
	for i, jobs := range w.BG {
		v.start[i] = make([]int64, len(jobs))
		v.end[i] = make([]int64, len(jobs))
		for k, j := range jobs {
			v.start[i][k] = j.Start.UnixNano()
			v.end[i][k] = j.Start.Add(j.Len).UnixNano()
		}
	}
	return v
}

// at returns the index of the first job on resource i that ends after tn,
// and whether it has started by tn (is running then).
func (v *bgView) at(i int, tn int64) (int, bool) {
	end := v.end[i]
	k := v.last[i]
	if k > 0 && (k > len(end) || end[k-1] > tn) {
		k = 0 // tn went back: search from the first job
	}
	// Forward from k a few steps, then by bisection over the rest.
	for n := 0; k < len(end) && end[k] <= tn; n++ {
		if n == 8 {
			k += sort.Search(len(end)-k, func(x int) bool { return end[k+x] > tn })
			break
		}
		k++
	}
	if k != v.last[i] {
		v.last[i], v.ids[i] = k, ""
	}
	return k, k < len(end) && v.start[i][k] <= tn
}

// id is the job id of BG[i][k], k the index at last returned.
func (v *bgView) id(i, k int, name string) string {
	if v.ids[i] == "" {
		v.ids[i] = name + "/" + strconv.Itoa(k)
	}
	return v.ids[i]
}

type holdAt struct {
	id         string
	start, end time.Time
}

type event struct {
	t   time.Time
	id  string
	dur time.Duration
}

func insert(evs []event, e event) []event {
	i, _ := slices.BinarySearchFunc(evs, e.t, func(x event, t time.Time) int {
		if x.t.After(t) {
			return 1
		}
		return -1 // equal times keep insertion order
	})
	return slices.Insert(evs, i, e)
}

// Run drives mechanism mech ("DRRM", "SRRM_r", "SRRM_m") through w, as a
// policy.ReservationBook opened with registry.Admission (drrm, srrm-random,
// srrm); seed drives SRRM_r's random choices. Every arrival is offered to
// Admit with the non-reserved jobs running then (DRRM's graph does not read
// them, SRRM_m forecasts its preemption cost from them); an admitted
// reservation is bound at the start policy.BookedStart reports (SRRM: the
// booked start; DRRM: its ET). fail, when non-nil, fails one resource at
// T0 + fail.Sigma·w.Horizon(): DRRM applies the paper's figure-2 rule
// (reserve.Graph.FailResource), SRRM loses everything booked there
// (reserve.Static.FailResource); each reservation so lost counts in Failed.
// A non-reserved job preempted by a reservation is not resumed: the
// reservation holds the resource for its run, after which the resource's
// non-reserved queue goes on as drawn (the same jobs under every mechanism).
func Run(w *World, mech string, seed uint64, fail *Failure) (Result, error) {
	m, err := newBook(mech, w.Res, seed)
	if err != nil {
		return Result{}, err
	}
	return runBook(w, m, fail)
}

// RunAdmission is Run with any admission policy: a built-in other than the
// paper's three, or one served by a plugin (policyrpc), which is how a
// centre replays its own admission rule. The book is opened with
// adm.NewBook(w.Res, seed); everything else is Run's.
func RunAdmission(w *World, adm policy.Admission, seed uint64, fail *Failure) (Result, error) {
	m := adm.NewBook(w.Res, seed)
	if c, ok := m.(interface{ Close() error }); ok {
		defer c.Close()
	}
	r, err := runBook(w, m, fail)
	if f, ok := m.(interface{ Failed() error }); ok && err == nil && f.Failed() != nil {
		return Result{}, fmt.Errorf("admission %s: %w", adm.Name(), f.Failed())
	}
	return r, err
}

func runBook(w *World, m policy.ReservationBook, fail *Failure) (Result, error) {
	booked, _ := m.(policy.BookedStart)
	bg := newBGView(w)
	var (
		o        Result
		binds    []event
		ends     []event
		held     = map[string][]holdAt{}
		where    = map[string]string{}
		next     = 0
		dead     = -1
		failAt   time.Time
		failPend = fail != nil
		unhold   = func(id string) {
			r, ok := where[id]
			if !ok {
				return
			}
			held[r] = slices.DeleteFunc(held[r], func(h holdAt) bool { return h.id == id })
			delete(where, id)
		}
	)
	if fail != nil {
		if fail.Resource < 0 || fail.Resource >= len(w.Res) || !(fail.Sigma > 0 && fail.Sigma <= 1) {
			return Result{}, fmt.Errorf("%w: failure %+v: want σ in (0, 1] and a resource index below %d", ErrConfig, *fail, len(w.Res))
		}
		failAt = T0.Add(time.Duration(fail.Sigma * float64(w.Horizon())))
	}
	const (
		kEnd = iota
		kFail
		kBind
		kArrive
		kNone
	)
	for {
		t, kind := time.Time{}, kNone
		pick := func(at time.Time, k int) {
			if kind == kNone || at.Before(t) {
				t, kind = at, k
			}
		}
		if len(ends) > 0 {
			pick(ends[0].t, kEnd)
		}
		if failPend {
			pick(failAt, kFail)
		}
		if len(binds) > 0 {
			pick(binds[0].t, kBind)
		}
		if next < len(w.Reqs) {
			pick(w.At[next], kArrive)
		}
		switch kind {
		case kNone:
			return o, nil
		case kEnd:
			e := ends[0]
			ends = ends[1:]
			m.Remove(e.id)
			unhold(e.id)
			o.Completed++
		case kFail:
			failPend = false
			dead = fail.Resource
			lost := m.FailResource(w.Res[dead].Name)
			gone := map[string]bool{}
			for _, id := range lost {
				gone[id] = true
				unhold(id)
			}
			o.Failed += len(lost)
			del := func(e event) bool { return gone[e.id] }
			binds = slices.DeleteFunc(binds, del)
			ends = slices.DeleteFunc(ends, del)
		case kBind:
			e := binds[0]
			binds = binds[1:]
			b, err := m.Bind(e.id, e.t, w.running(e.t, held, dead, bg))
			if err != nil {
				o.BindFailed++
				m.Remove(e.id)
				continue
			}
			if len(b.Preempt) > 0 {
				o.Preempting++
				o.TPC += b.Cost
			}
			end := b.Start.Add(e.dur)
			held[b.Resource] = append(held[b.Resource], holdAt{e.id, b.Start, end})
			where[e.id] = b.Resource
			ends = insert(ends, event{end, e.id, 0})
		case kArrive:
			q, now := w.Reqs[next], w.At[next]
			next++
			o.Requests++
			if m.Admit(q, now, w.running(now, held, dead, bg)).Code == policy.Success {
				at, ok := q.ET, false
				if booked != nil {
					if at, ok = booked.Booked(q.ID); !ok {
						at = q.ET
					}
				}
				o.Admitted++
				o.AdmittedID = append(o.AdmittedID, q.ID)
				binds = insert(binds, event{at, q.ID, q.Dur})
			}
		}
	}
}

// Common returns the ids every one of the results admitted.
func Common(rs ...Result) map[string]bool {
	count := map[string]int{}
	for _, r := range rs {
		for _, id := range r.AdmittedID {
			count[id]++
		}
	}
	out := map[string]bool{}
	for id, n := range count {
		if n == len(rs) {
			out[id] = true
		}
	}
	return out
}
