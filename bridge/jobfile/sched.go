package jobfile

// The scheduling section of a job file: sites, deadline, benefit, QoS and
// the advance-reservation window (split from parse.go, which parses the
// rest with the same parser).

import (
	"fmt"
	"math"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

func (p *parser) siteName(n *yaml.Node, field, s string) bool {
	if !jobrules.IsName(s) {
		p.fail(n, field, ErrValue, "%q is not a site name (1-64 letters, digits, '.', '_' or '-')", s)
		return false
	}
	return true
}

func (p *parser) siteList(e entry, field string) []string {
	names, nodes, _ := p.strs(e.val, field, "site names")
	var out []string
	seen := map[string]int{}
	for i, s := range names {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !p.siteName(nodes[i], f, s) {
			continue
		}
		if line, dup := seen[s]; dup {
			p.fail(nodes[i], f, ErrValue, "site %q is already listed at line %d", s, line)
			continue
		}
		seen[s] = nodes[i].Line
		out = append(out, s)
	}
	return out
}

func (p *parser) scheduling(e entry, j *Job) {
	if !p.mapping(e.val, "scheduling", "a mapping with origin, sites, deadline, qos, ...") {
		return
	}
	f := p.fields(e.val, "scheduling", schedulingFields)
	s := &j.Scheduling
	if kv, ok := f["origin"]; ok {
		if v, ok := p.text(kv.val, "scheduling.origin", "a site name"); ok && p.siteName(kv.val, "scheduling.origin", v) {
			s.Origin = v
		}
	}
	if kv, ok := f["data_size"]; ok {
		if v, ok := p.text(kv.val, "scheduling.data_size", sizeHint); ok {
			if n, err := ParseSize(v); err != nil {
				p.fail(kv.val, "scheduling.data_size", ErrValue, "%v", err)
			} else if p.rule(kv.val, "scheduling.data_size", jobrules.DataSize(n)) {
				s.DataSize = n
			}
		}
		if _, ok := f["origin"]; !ok && s.DataSize > 0 {
			p.fail(kv.key, "scheduling.data_size", ErrConflict, "needs scheduling.origin (the site the data is moved from)")
		}
	}
	if kv, ok := f["sites"]; ok {
		s.Sites = p.siteList(kv, "scheduling.sites")
	}
	if kv, ok := f["prefer"]; ok {
		s.Prefer = p.siteList(kv, "scheduling.prefer")
		if len(s.Sites) > 0 {
			for i, name := range s.Prefer {
				if !contains(s.Sites, name) {
					field := fmt.Sprintf("scheduling.prefer[%d]", i)
					p.failAt(p.pos[field], field, ErrConflict, "preferred site %q is not among the allowed scheduling.sites (%s)", name, strings.Join(s.Sites, ", "))
				}
			}
		}
	}
	if kv, ok := f["no_split"]; ok {
		if v, ok := p.boolean(kv.val, "scheduling.no_split"); ok {
			s.NoSplit = v
		}
	}
	if kv, ok := f["deadline"]; ok {
		if t, ok := p.timeSpec(kv.val, "scheduling.deadline"); ok {
			if t.Relative && t.Rel <= 0 {
				p.fail(kv.val, "scheduling.deadline", ErrValue, "a relative deadline must be after the submission, got %s", kv.val.Value)
			} else {
				s.Deadline = t
			}
		}
	}
	if kv, ok := f["qos"]; ok {
		if v, ok := p.text(kv.val, "scheduling.qos", "one of auto, high, low, none"); ok {
			valid := []string{string(QoSAuto), string(QoSHigh), string(QoSLow), string(QoSNone)}
			if contains(valid, v) {
				s.QoS = QoS(v)
			} else {
				msg := fmt.Sprintf("must be one of %s, got %q", strings.Join(valid, ", "), v)
				if sg := Suggest(v, valid); sg != "" {
					msg += fmt.Sprintf("; did you mean %q?", sg)
				}
				p.fail(kv.val, "scheduling.qos", ErrValue, "%s", msg)
			}
		}
	}
	if kv, ok := f["benefit"]; ok {
		p.benefit(kv, j, f)
	}
	if kv, ok := f["reservation"]; ok {
		p.reservation(kv, j)
	}
	if kv, ok := f["deadline_policy"]; ok {
		valid := []string{"strict", "best-effort"}
		if v, ok := p.text(kv.val, "scheduling.deadline_policy", "strict or best-effort"); ok {
			if contains(valid, v) {
				s.DeadlinePolicy = v
			} else {
				msg := fmt.Sprintf("must be strict (refuse a job no site can finish by its deadline) or best-effort (accept it with a warning), got %q", v)
				if sg := Suggest(v, valid); sg != "" {
					msg += fmt.Sprintf("; did you mean %q?", sg)
				}
				p.fail(kv.val, "scheduling.deadline_policy", ErrValue, "%s", msg)
			}
		}
		if _, has := f["deadline"]; !has {
			p.fail(kv.key, "scheduling.deadline_policy", ErrConflict, "needs scheduling.deadline")
		}
	}
}

func (p *parser) benefit(e entry, j *Job, sched map[string]entry) {
	if !p.mapping(e.val, "scheduling.benefit", "a mapping {a: ..., b: ..., c: ...}") {
		return
	}
	f := p.fields(e.val, "scheduling.benefit", benefitFields)
	b := &Benefit{Shape: BenefitLinear}
	ok := true
	if kv, has := f["shape"]; has {
		if v, good := p.text(kv.val, "scheduling.benefit.shape", "linear or step"); good && (v == BenefitLinear || v == BenefitStep) {
			b.Shape = v
		} else if good {
			p.fail(kv.val, "scheduling.benefit.shape", ErrValue, "must be linear (a, then losing c per second after b·deadline) or step (a until b·deadline, then a - c), got %q", v)
			ok = false
		} else {
			ok = false
		}
	}
	for _, k := range benefitFields[1:] {
		field := "scheduling.benefit." + k
		want := map[string]string{"a": "a number > 0 (the full benefit)", "b": "a number > 0 (the fraction of the deadline that earns the full benefit)", "c": "a number >= 0 (the loss per second after b·deadline)"}[k]
		if b.Shape == BenefitStep && k == "c" {
			want = "a number >= 0 (the loss at b·deadline; default: a)"
		}
		kv, has := f[k]
		if !has && k == "c" && b.Shape == BenefitStep {
			b.C = b.A
			continue
		}
		if !has {
			p.fail(e.key, field, ErrRequired, "missing; must be %s", want)
			ok = false
			continue
		}
		v, good := p.number(kv.val, field, want)
		if good && (k == "c" && v < 0 || k != "c" && v <= 0) {
			p.fail(kv.val, field, ErrValue, "must be %s, got %s", want, kv.val.Value)
			good = false
		} else if good {
			good = p.rule(kv.val, field, jobrules.Benefit(v, 0, k != "c"))
		}
		ok = ok && good
		switch k {
		case "a":
			b.A = v
		case "b":
			b.B = v
		case "c":
			b.C = v
		}
	}
	if _, has := sched["deadline"]; !has {
		p.fail(e.key, "scheduling.benefit", ErrConflict, "needs scheduling.deadline: the benefit function is measured against the deadline (SPEC.md §4)")
		ok = false
	}
	if ok {
		j.Scheduling.Benefit = b
	}
}

func (p *parser) reservation(e entry, j *Job) {
	if !p.mapping(e.val, "scheduling.reservation", "a mapping with earliest_start and latest_end or flexibility") {
		return
	}
	f := p.fields(e.val, "scheduling.reservation", reservationFields)
	r := &Reservation{}
	ok := true
	kv, has := f["earliest_start"]
	if !has {
		p.fail(e.key, "scheduling.reservation.earliest_start", ErrRequired, "missing; give the earliest start, e.g. +1h or 2026-12-01T08:00:00Z")
		ok = false
	} else if t, good := p.timeSpec(kv.val, "scheduling.reservation.earliest_start"); good {
		r.EarliestStart = t
	} else {
		ok = false
	}
	le, hasLE := f["latest_end"]
	fl, hasFL := f["flexibility"]
	if hasLE && hasFL {
		p.fail(fl.key, "scheduling.reservation.flexibility", ErrConflict, "give latest_end or flexibility, not both (flexibility = (window − walltime)/window)")
		return
	}
	if hasLE {
		t, good := p.timeSpec(le.val, "scheduling.reservation.latest_end")
		if !good {
			return
		}
		r.LatestEnd = t
		wall := j.Resources.Walltime
		if ok && t.Relative == r.EarliestStart.Relative && wall > 0 {
			w := t.Rel - r.EarliestStart.Rel
			if !t.Relative {
				w = t.Abs.Sub(r.EarliestStart.Abs)
			}
			if w < wall {
				p.fail(le.val, "scheduling.reservation.latest_end", ErrValue, "the window from earliest_start to latest_end (%s) must hold resources.walltime (%s)", w, wall)
				return
			}
		}
	} else {
		flex := 0.0
		if hasFL {
			v, good := p.number(fl.val, "scheduling.reservation.flexibility", "a number in [0, 1)")
			if !good {
				return
			}
			if v < 0 || v >= 1 {
				p.fail(fl.val, "scheduling.reservation.flexibility", ErrValue, "must be a number in [0, 1) (the share of the window the job may slide in), got %s", fl.val.Value)
				return
			}
			flex = v
		}
		wf := float64(j.Resources.Walltime) / (1 - flex)
		if wf > float64(jobrules.MaxHorizon) {
			at := e.key
			if hasFL {
				at = fl.val
			}
			p.fail(at, "scheduling.reservation.flexibility", ErrValue, "the window walltime/(1 − flexibility) = %.3g years is longer than 10 years; lower the flexibility", wf/float64(365*24*time.Hour))
			return
		}
		// The window holds the walltime exactly (float rounding must not
		// shorten it by a nanosecond) and its end must not overflow.
		wall := j.Resources.Walltime
		w, tooLong := wall, false
		if flex > 0 {
			wf := float64(wall) / (1 - flex)
			tooLong = wf >= math.MaxInt64
			w = max(time.Duration(wf), wall)
		}
		r.LatestEnd = r.EarliestStart
		if r.LatestEnd.Relative {
			tooLong = tooLong || r.LatestEnd.Rel > math.MaxInt64-w
			r.LatestEnd.Rel += w
		} else {
			r.LatestEnd.Abs = r.LatestEnd.Abs.Add(w)
			tooLong = tooLong || r.LatestEnd.Abs.Year() > 9999
		}
		if tooLong {
			p.fail(e.key, "scheduling.reservation", ErrValue, "the window from earliest_start %s for walltime/(1 − flexibility) ends too far in the future; shorten resources.walltime or lower flexibility", r.EarliestStart)
			return
		}
	}
	if ok {
		j.Scheduling.Reservation = r
	}
}
