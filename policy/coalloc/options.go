package coalloc

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gridsub/gridsub/policy"
)

// Options configures a planner. The zero value is greedy selection with EASY
// backfilling in adaptive mode, the paper's recommended combination.
type Options struct {
	// Selection: "greedy" (Algorithm 3, default) or "optimal" (Algorithm 2).
	// Used by the adaptive mode; the baselines have their own.
	Selection string
	// Backfill: "none" (strict FCFS), "easy" (default) or "conservative".
	// Ignored by "sabin" (the sites' own schedulers backfill).
	Backfill string
	// Mode: "adaptive" (paper 000, default), "single-site" (Yahyapour: one
	// site per job, earliest completion), "non-adaptive" (Yahyapour
	// multi-site: local > remote > multi-site, blind to h and p),
	// "local-first" (one site per job in the order local > remote, blind to
	// h and p: NonAdaptive without its multi-site class) or "sabin" (a copy
	// of every job to every site that could run it).
	Mode string
	// MaxOptimalSites caps the sites Optimal enumerates (2^N subsets):
	// default 16, at most 24.
	MaxOptimalSites int
	// Beaten is how many runner-up options a decision keeps: default 3;
	// negative keeps none.
	Beaten int
	// Local (greedy selection only): a job whose input must move from its
	// origin site also has that site evaluated alone, beside Algorithm 3's
	// windows (Greedy.Local). Off, greedy is paper 000's Algorithm 3, whose
	// figures the experiments reproduce (their jobs have submit sites and
	// data, and the origin would change where some run); the live default
	// (broker.policy: greedy) turns it on: "greedy-local-easy".
	Local bool
}

var (
	selections = []string{"greedy", "optimal"}
	backfills  = []string{string(None), string(EASY), string(Conservative)}
	modes      = []string{"adaptive", "single-site", "local-first", "non-adaptive", "sabin"}
)

// New builds a planner from Options; bad values are an error wrapping
// ErrBadOption that lists the valid ones.
func New(o Options) (policy.Planner, error) {
	sel := strings.ToLower(strings.TrimSpace(o.Selection))
	bf := strings.ToLower(strings.TrimSpace(o.Backfill))
	mode := strings.ToLower(strings.TrimSpace(o.Mode))
	if sel == "" {
		sel = "greedy"
	}
	if bf == "" {
		bf = string(EASY)
	}
	if mode == "" {
		mode = "adaptive"
	}
	if !slices.Contains(selections, sel) {
		return nil, fmt.Errorf("%w: selection %q: valid are %s", ErrBadOption, o.Selection, strings.Join(selections, ", "))
	}
	if !slices.Contains(backfills, bf) {
		return nil, fmt.Errorf("%w: backfill %q: valid are %s", ErrBadOption, o.Backfill, strings.Join(backfills, ", "))
	}
	if !slices.Contains(modes, mode) {
		return nil, fmt.Errorf("%w: mode %q: valid are %s", ErrBadOption, o.Mode, strings.Join(modes, ", "))
	}
	if o.Local && (sel != "greedy" || mode != "adaptive") {
		return nil, fmt.Errorf("%w: Local applies to greedy selection in adaptive mode only, not %s/%s", ErrBadOption, sel, mode)
	}
	maxOpt := o.MaxOptimalSites
	switch {
	case maxOpt == 0:
		maxOpt = DefaultMaxOptimalSites
	case maxOpt < 1 || maxOpt > HardMaxOptimalSites:
		return nil, fmt.Errorf("%w: MaxOptimalSites %d: valid are 1..%d (optimal selection costs 2^N per job)", ErrBadOption, o.MaxOptimalSites, HardMaxOptimalSites)
	}
	beaten := o.Beaten
	switch {
	case beaten == 0:
		beaten = 3
	case beaten < 0:
		beaten = 0
	}
	if mode == "sabin" {
		return &Sabin{}, nil
	}
	p := &Planner{bf: Backfill(bf), beaten: beaten}
	switch mode {
	case "adaptive":
		if sel == "optimal" {
			p.sel = &Optimal{MaxSites: maxOpt}
		} else {
			p.sel = Greedy{Local: o.Local}
		}
		p.name = sel + "-" + bf
		if o.Local {
			p.name = "greedy-local-" + bf
		}
	case "single-site":
		p.sel, p.single = SingleSite{}, true
		p.name = "single-site-" + bf
	case "local-first":
		p.sel, p.single = NonAdaptive{Single: true}, true
		p.name = "local-first-" + bf
	case "non-adaptive":
		p.sel = NonAdaptive{}
		p.name = "non-adaptive-" + bf
	}
	return p, nil
}

// Names lists the planner names ByName knows.
func Names() []string {
	var out []string
	for _, m := range []string{"greedy", "greedy-local", "optimal", "single-site", "local-first", "non-adaptive"} {
		for _, b := range backfills {
			out = append(out, m+"-"+b)
		}
	}
	return append(out, "sabin")
}

// ByName builds a planner from a name as used in config files:
// "<greedy|greedy-local|optimal|single-site|local-first|non-adaptive>-<none|easy|conservative>"
// or "sabin" ("greedy-local": Options.Local). The planner's Name() is the
// same string.
func ByName(name string) (policy.Planner, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "sabin" {
		return New(Options{Mode: "sabin"})
	}
	i := strings.LastIndexByte(n, '-')
	if i > 0 {
		head, bf := n[:i], n[i+1:]
		switch head {
		case "greedy", "optimal":
			return New(Options{Selection: head, Backfill: bf})
		case "greedy-local":
			return New(Options{Selection: "greedy", Backfill: bf, Local: true})
		case "single-site", "local-first", "non-adaptive":
			return New(Options{Mode: head, Backfill: bf})
		}
	}
	return nil, fmt.Errorf("%w: planner name %q: valid are %s", ErrBadOption, name, strings.Join(Names(), ", "))
}
