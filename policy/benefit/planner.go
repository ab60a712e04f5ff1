package benefit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// ErrBadOption: a planner name or option that does not exist.
var ErrBadOption = errors.New("benefit: bad option")

// Planner maps the whole queue afresh on every Plan with one heuristic of
// paper 003 (Benefit, MinMin or Sufferage): that is the repetitive mapping
// of the paper's Algorithm 1, since a job left waiting by one cycle (mapped
// but not started) is mapped again by the next with the sites' new state.
// Each site is one machine (a job runs on one site, never split); the
// input comes from the job's origin site, or from the submitting machine
// over the measured uplink (policy.Snapshot.TransferTime).
type Planner struct {
	cfg  Config
	name string
}

var _ policy.Planner = (*Planner)(nil)

// Names lists the planner names ByName accepts.
func Names() []string { return []string{Benefit, MinMin, Sufferage} }

// ByName returns the planner of a heuristic: "benefit", "min-min" or
// "sufferage" (data-aware: the transfer counts). Benefit contests machines
// (Config.ContestMachines): the live planner's sites are machines with no
// repository between them, so without it a pressed job could never take
// a site another job of the pass holds.
func ByName(name string) (*Planner, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if !slices.Contains(Names(), n) {
		return nil, fmt.Errorf("%w: planner name %q: valid are %s", ErrBadOption, name, strings.Join(Names(), ", "))
	}
	return New(Config{Heuristic: n, ContestMachines: true})
}

// New returns a planner for cfg.
func New(cfg Config) (*Planner, error) {
	if !slices.Contains(Names(), cfg.Heuristic) {
		return nil, fmt.Errorf("%w: heuristic %q: valid are %s", ErrBadOption, cfg.Heuristic, strings.Join(Names(), ", "))
	}
	name := cfg.Heuristic
	if cfg.Blind {
		name += "-blind"
	}
	return &Planner{cfg: cfg, name: name}, nil
}

// Name is the heuristic's name ("-blind" appended when data-blind).
func (p *Planner) Name() string { return p.name }

// Plan maps every queued job. A job the heuristic maps to nodes free now
// is started; one mapped later gets a Reserve decision (the prediction,
// mapped again next cycle; left out when Quiet); a job whose earliest
// completion anywhere is after its deadline is rejected with that
// completion in the reason, unless it is best-effort (policy.Job.BestEffort),
// when it is mapped like any other; a job wider than every site it may use
// is rejected; one whose sites are all down waits (Pending).
func (p *Planner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	plan := &policy.Plan{}
	prob, idx := p.problem(s, plan)
	maps := Map(prob, p.cfg)
	type dec struct {
		k int
		m Mapping
	}
	var starts, later []dec
	for k, m := range maps {
		j := &s.Queue[idx[k]]
		switch {
		case m.Dropped:
			site := "?"
			if m.BestAt >= 0 {
				site = s.Sites[m.BestAt].Name
			}
			end := s.Now.Add(m.Best)
			plan.Decisions = append(plan.Decisions, policy.Decision{Job: j.ID, Action: policy.Reject,
				Status: policy.NewStatus(policy.Unresolvable, p.name, fmt.Sprintf(
					"deadline %s cannot be met: the earliest predicted completion is %s at %s, %s late",
					j.Deadline.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), site, end.Sub(j.Deadline).Round(time.Second)))})
		case m.Machine < 0:
			if !s.Quiet {
				plan.Pending = append(plan.Pending, policy.Pending{Job: j.ID,
					Status: policy.NewStatus(policy.Unschedulable, p.name, "every site the job may use is down")})
			}
		case m.Start == 0:
			starts = append(starts, dec{k, m})
		default:
			later = append(later, dec{k, m})
		}
	}
	byTime := func(a, b dec) int {
		if c := a.m.Start - b.m.Start; c != 0 {
			return sign(c)
		}
		if c := a.m.End - b.m.End; c != 0 {
			return sign(c)
		}
		return a.k - b.k
	}
	slices.SortFunc(starts, byTime)
	slices.SortFunc(later, byTime)
	for _, d := range starts {
		plan.Decisions = append(plan.Decisions, p.decision(s, prob, idx, d.k, d.m, policy.Start))
	}
	if !s.Quiet {
		for _, d := range later {
			plan.Decisions = append(plan.Decisions, p.decision(s, prob, idx, d.k, d.m, policy.Reserve))
		}
	}
	return plan, nil
}

func sign(d time.Duration) int {
	if d < 0 {
		return -1
	}
	return 1
}

func (p *Planner) decision(s *policy.Snapshot, prob *Problem, idx []int, k int, m Mapping, a policy.Action) policy.Decision {
	j := &s.Queue[idx[k]]
	t := &prob.Tasks[k]
	var tran time.Duration
	if m.Source >= 0 {
		tran = t.Sources[m.Source].Tran[m.Machine]
	}
	o := policy.Option{Parts: []policy.Part{{Site: m.Machine, Nodes: j.Width}}, Start: s.Now.Add(m.Start),
		Runtime: t.ETC[m.Machine], Transfer: tran, Immediate: m.Start == 0}
	d := policy.Decision{Job: j.ID, Action: a, Chosen: o}
	if s.Quiet {
		return d
	}
	// What fmt.Sprintf("%s: predicted completion %s at %s (round %d)",
	// ...) and ", benefit %.4g" would write, appended (the formatting was a
	// sixth of a 2,000-job pass; TestDecisionWording holds it to fmt).
	b := make([]byte, 0, 96)
	b = append(b, p.name...)
	b = append(b, ": predicted completion "...)
	b = o.End().UTC().AppendFormat(b, time.RFC3339)
	b = append(b, " at "...)
	b = append(b, s.Sites[m.Machine].Name...)
	b = append(b, " (round "...)
	b = strconv.AppendInt(b, int64(m.Round), 10)
	b = append(b, ')')
	if !j.Deadline.IsZero() {
		b = append(b, ", benefit "...)
		b = strconv.AppendFloat(b, j.Worth.Value(o.End().Sub(j.Submit), j.Deadline.Sub(j.Submit)), 'g', 4, 64)
	}
	why := string(b)
	code := policy.Success
	if a == policy.Reserve {
		code = policy.Unschedulable
	}
	d.Status = policy.NewStatus(code, p.name, why)
	return d
}

// problem turns the snapshot into a mapping problem: one machine per site,
// one task per queued job that some allowed site could ever hold. Jobs too
// wide for every allowed site are rejected into plan. idx maps tasks to
// queue positions.
func (p *Planner) problem(s *policy.Snapshot, plan *policy.Plan) (*Problem, []int) {
	prob := &Problem{Machines: make([]Machine, len(s.Sites))}
	for i := range s.Sites {
		st := &s.Sites[i]
		if st.Down {
			continue
		}
		n := make([]time.Duration, 0, st.Nodes)
		for k := 0; k < st.Free && len(n) < st.Nodes; k++ {
			n = append(n, 0)
		}
		for _, h := range st.Busy {
			at := max(h.Until.Sub(s.Now), 1) // overdue: any moment, but not free now
			for k := 0; k < h.Nodes && len(n) < st.Nodes; k++ {
				n = append(n, at)
			}
		}
		prob.Machines[i].Nodes = n
	}
	idx := make([]int, 0, len(s.Queue))
	prob.Tasks = make([]Task, 0, len(s.Queue))
	// One backing array each for the tasks' run and transfer times.
	ns := len(s.Sites)
	etcs, trans := make([]time.Duration, len(s.Queue)*ns), make([]time.Duration, len(s.Queue)*ns)
	for q := range s.Queue {
		j := &s.Queue[q]
		allowed := func(m int) bool { return j.Allowed == nil || slices.Contains(j.Allowed, m) }
		widest := 0
		for m := range s.Sites {
			if allowed(m) {
				widest = max(widest, s.Sites[m].Nodes)
			}
		}
		if j.Width > widest || j.Width < 1 {
			plan.Decisions = append(plan.Decisions, policy.Decision{Job: j.ID, Action: policy.Reject,
				Status: policy.NewStatus(policy.Unresolvable, p.name, fmt.Sprintf(
					"%d node(s) do not fit on one site: the widest site the job may use has %d (the %s planner does not split jobs)", j.Width, widest, p.name))})
			continue
		}
		t := Task{Width: j.Width, ETC: etcs[q*ns : (q+1)*ns : (q+1)*ns], Submit: j.Submit.Sub(s.Now),
			Deadline: j.Deadline.Sub(s.Now), HasDeadline: !j.Deadline.IsZero(), Keep: j.BestEffort, Worth: j.Worth}
		src := Source{Repo: -1, Tran: trans[q*ns : (q+1)*ns : (q+1)*ns]}
		for m := range s.Sites {
			t.ETC[m] = -1
			if !allowed(m) || s.Sites[m].Down || j.Width > s.Sites[m].Nodes {
				continue
			}
			parts := []policy.Part{{Site: m, Nodes: j.Width}}
			t.ETC[m] = max(s.Runtime(j, parts), 1)
			src.Tran[m] = s.Transfer(j, parts)
		}
		t.Sources = []Source{src}
		if len(j.Preferred) > 0 {
			t.Prefer = make([]bool, len(s.Sites))
			for _, m := range j.Preferred {
				if m >= 0 && m < len(s.Sites) {
					t.Prefer[m] = true
				}
			}
		}
		prob.Tasks = append(prob.Tasks, t)
		idx = append(idx, q)
	}
	return prob, idx
}
