package feasible

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Name is the built-in's name.
const Name = "capacity"

// Names lists the built-in feasibility checks.
func Names() []string { return []string{Name} }

// ByName returns the built-in feasibility check of that name; the error
// names the valid ones.
func ByName(name string) (policy.Feasibility, error) {
	if strings.ToLower(strings.TrimSpace(name)) == Name {
		return Check{}, nil
	}
	return nil, fmt.Errorf("unknown feasibility %q: valid are %s", name, strings.Join(Names(), ", "))
}

// Check is the built-in feasibility check (see the package doc).
type Check struct{}

var _ policy.Feasibility = Check{}

// Name is Name.
func (Check) Name() string { return Name }

// Feasible applies the checks to d on s's sites at s.Now.
func (c Check) Feasible(d *policy.Demand, s *policy.Snapshot) (policy.Verdict, error) {
	sites := s.Sites
	cand, misfits := Eligible(d, sites)
	if len(cand) == 0 {
		if len(misfits) == 0 {
			return refuse(policy.CauseSites, "no site is allowed"), nil
		}
		return refuse(policy.CauseSites, "no allowed site has nodes with what the job asks per node: "+strings.Join(misfits, "; ")), nil
	}
	also := ""
	if len(misfits) > 0 {
		also = " (not eligible: " + strings.Join(misfits, "; ") + ")"
	}
	unknown := d.Window || slices.ContainsFunc(cand, func(i int) bool { return sites[i].Nodes <= 0 })
	total, largest := 0, cand[0]
	var list []string
	for _, i := range cand {
		total += sites[i].Nodes
		if sites[i].Nodes > sites[largest].Nodes {
			largest = i
		}
		list = append(list, fmt.Sprintf("%s %d", sites[i].Name, sites[i].Nodes))
	}
	if !unknown {
		switch {
		case d.NoSplit && d.Width > sites[largest].Nodes:
			return refuse(policy.CauseCapacity, fmt.Sprintf("needs %d nodes on one site (no_split); the largest eligible site is %s with %d (%s)%s",
				d.Width, sites[largest].Name, sites[largest].Nodes, strings.Join(list, ", "), also)), nil
		case d.Width > total:
			return refuse(policy.CauseCapacity, fmt.Sprintf("needs %d nodes; the eligible sites have %d in all (%s)%s", d.Width, total, strings.Join(list, ", "), also)), nil
		}
	}
	why := DeadlineMiss(d, s, cand)
	switch {
	case why == "":
		return policy.Verdict{Status: policy.NewStatus(policy.Success, Name)}, nil
	case d.BestEffort:
		return policy.Verdict{Status: policy.NewStatus(policy.Success, Name),
			Warning: "no site can finish the job by its " + why + "; accepted (deadline_policy: best-effort): it will run late"}, nil
	}
	return refuse(policy.CauseDeadline, "cannot meet its "+why+also+" (deadline_policy: strict; best-effort would accept it to run late)"), nil
}

// Late is the deadline rule on the eligible sites at s.Now.
func (Check) Late(d *policy.Demand, s *policy.Snapshot) (string, error) {
	if d.Deadline.IsZero() || d.Window {
		return "", nil
	}
	cand, _ := Eligible(d, s.Sites)
	return DeadlineMiss(d, s, cand), nil
}

func refuse(c policy.Cause, why string) policy.Verdict {
	return policy.Verdict{Status: policy.NewStatus(policy.Unresolvable, Name, why), Cause: c}
}

// Eligible lists the sites d may use whose nodes have what it asks per
// node (a site not known yet is eligible), and says why the others' nodes
// do not.
func Eligible(d *policy.Demand, sites []policy.Site) (cand []int, misfits []string) {
	for i, s := range sites {
		if d.Sites != nil && !slices.Contains(d.Sites, s.Name) {
			continue
		}
		if s.Nodes <= 0 { // not known: neither its size nor its nodes rule it out
			cand = append(cand, i)
			continue
		}
		if why := s.Shape.Lacks(d.PerNode); why != "" {
			misfits = append(misfits, s.Name+": "+why)
			continue
		}
		cand = append(cand, i)
	}
	return cand, misfits
}

// DeadlineMiss is the deadline rule. Under the run-time model the fastest
// placement on the candidate sites that holds the request — one site of
// unknown size or big enough, else (without no_split, when every size is
// known) the fastest sites together, p·max h·T — ends at s.Now + run +
// transfer (the input transfer from the origin over s.Links; queueing is
// not counted). If that is after the deadline, it returns why ("deadline
// T: the fastest placement ..."), else "". A request without a deadline,
// or with a reservation window (the window is its deadline), never misses.
func DeadlineMiss(d *policy.Demand, s *policy.Snapshot, cand []int) string {
	if d.Deadline.IsZero() || d.Window || len(cand) == 0 {
		return ""
	}
	run, where := fastest(d, s, cand)
	if where == "" {
		return ""
	}
	end := s.Now.Add(run)
	if !end.After(d.Deadline) {
		return ""
	}
	return fmt.Sprintf("deadline %s: the fastest placement, %s, takes %s under the run-time model, so even started at once it would end at %s (%s late)",
		d.Deadline.UTC().Format(time.RFC3339), where, run.Round(time.Second), end.UTC().Format(time.RFC3339), end.Sub(d.Deadline).Round(time.Second))
}

// fastest is the shortest predicted run plus input transfer of d on the
// candidate sites and its placement ("Harbin:32 (h 0.5)", or
// "Harbin:32+Shanghai:8" across sites): on one site, the fastest that may
// hold it (size known and enough, or not known); across sites, the fastest
// sites first until the width fits. "" when no placement holds it.
func fastest(d *policy.Demand, s *policy.Snapshot, cand []int) (time.Duration, string) {
	sites := s.Sites
	snap := policy.Snapshot{Sites: sites, MultiSite: s.MultiSite, Links: s.Links}
	pj := policy.Job{Width: d.Width, Estimate: d.Estimate, Origin: -1, DataSize: d.DataSize}
	for i, st := range sites {
		if d.Origin != "" && st.Name == d.Origin {
			pj.Origin = i
		}
	}
	byH := slices.Clone(cand)
	slices.SortStableFunc(byH, func(a, b int) int { return cmp.Compare(sites[a].H, sites[b].H) })
	best, where := time.Duration(-1), ""
	for _, i := range byH {
		if sites[i].Nodes <= 0 || sites[i].Nodes >= d.Width {
			parts := []policy.Part{{Site: i, Nodes: d.Width}}
			if r := snap.Runtime(&pj, parts) + snap.Transfer(&pj, parts); best < 0 || r < best {
				best, where = r, fmt.Sprintf("%s:%d (h %g)", sites[i].Name, d.Width, sites[i].H)
			}
		}
	}
	if best >= 0 || d.NoSplit {
		return best, where
	}
	var parts []policy.Part
	left := d.Width
	for _, i := range byH {
		n := min(left, sites[i].Nodes)
		parts = append(parts, policy.Part{Site: i, Nodes: n})
		if left -= n; left == 0 {
			break
		}
	}
	if left > 0 {
		return 0, ""
	}
	var sb strings.Builder
	for k, p := range parts {
		if k > 0 {
			sb.WriteByte('+')
		}
		fmt.Fprintf(&sb, "%s:%d", sites[p.Site].Name, p.Nodes)
	}
	return snap.Runtime(&pj, parts) + snap.Transfer(&pj, parts), sb.String()
}
