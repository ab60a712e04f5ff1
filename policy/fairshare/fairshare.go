package fairshare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gridsub/gridsub/policy"
)

// Names lists the built-ins, the default first.
func Names() []string { return []string{"fcfs", "fairshare"} }

// ByName returns a built-in by name.
func ByName(name string) (policy.Order, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "fcfs":
		return FCFS{}, nil
	case "fairshare":
		return FairShare{}, nil
	}
	return nil, fmt.Errorf("no queue order %q (valid: %s)", name, strings.Join(Names(), ", "))
}

// FCFS keeps the broker's order (QoS tier, then submission).
type FCFS struct{}

func (FCFS) Name() string { return "fcfs" }

func (FCFS) Order(in *policy.OrderInput) ([]int, error) {
	out := make([]int, len(in.Queue))
	for i := range out {
		out[i] = i
	}
	return out, nil
}

// FairShare orders the queue by Slurm's classic fair-share factor, the
// highest first:
//
//	F(u) = 2^(-U(u)/S(u))
//
// U(u) is user u's decayed use normalised over all users' (a job of n
// nodes running from s to e adds n·∫ 2^(-(now-t)/h) dt over [s, e], h the
// half-life), S(u) their shares normalised over the users in the input.
// A user who used nothing has F = 1; one who used everything with half the
// shares has F = 2^-2. Ties keep the broker's order.
type FairShare struct{}

func (FairShare) Name() string { return "fairshare" }

func (FairShare) Order(in *policy.OrderInput) ([]int, error) {
	f := Factors(in)
	out := make([]int, len(in.Queue))
	for i := range out {
		out[i] = i
	}
	slices.SortStableFunc(out, func(a, b int) int {
		fa, fb := f[in.Queue[a].User], f[in.Queue[b].User]
		switch {
		case fa > fb:
			return -1
		case fa < fb:
			return 1
		}
		return 0
	})
	return out, nil
}

// Usage is each user's decayed use at in.Now, in node-seconds: the jobs
// of in.Usage and the accounts of in.Accounted, decayed to in.Now.
func Usage(in *policy.OrderInput) map[string]float64 {
	h := in.HalfLife
	if h <= 0 {
		h = policy.DefaultHalfLife
	}
	hs := h.Seconds()
	u := map[string]float64{}
	for _, r := range in.Usage {
		end := r.End
		if end.IsZero() || end.After(in.Now) {
			end = in.Now
		}
		if !end.After(r.Start) || r.Nodes <= 0 {
			continue
		}
		ageEnd, ageStart := in.Now.Sub(end).Seconds(), in.Now.Sub(r.Start).Seconds()
		// n · ∫_s^e 2^(-(now-t)/h) dt = n · h/ln2 · (2^(-ageEnd/h) - 2^(-ageStart/h))
		u[r.User] += float64(r.Nodes) * hs / math.Ln2 * (math.Exp2(-ageEnd/hs) - math.Exp2(-ageStart/hs))
	}
	for _, a := range in.Accounted {
		if a.NodeSeconds <= 0 || math.IsNaN(a.NodeSeconds) || math.IsInf(a.NodeSeconds, 0) {
			continue
		}
		age := max(in.Now.Sub(a.At).Seconds(), 0) // an account dated after Now weighs fully
		u[a.User] += a.NodeSeconds * math.Exp2(-age/hs)
	}
	return u
}

// Factors is each user's fair-share factor 2^(-U/S) at in.Now: the users
// of the queue and of the use.
func Factors(in *policy.OrderInput) map[string]float64 {
	use := Usage(in)
	users := map[string]bool{}
	for _, q := range in.Queue {
		users[q.User] = true
	}
	for u := range use {
		users[u] = true
	}
	def := in.DefaultShares
	if def <= 0 {
		def = 1
	}
	shares := func(u string) float64 {
		if s, ok := in.Shares[u]; ok && s > 0 {
			return s
		}
		return def
	}
	var totalUse, totalShares float64
	for u := range users {
		totalUse += use[u]
		totalShares += shares(u)
	}
	f := map[string]float64{}
	for u := range users {
		U := 0.0
		if totalUse > 0 {
			U = use[u] / totalUse
		}
		S := shares(u) / totalShares
		f[u] = math.Exp2(-U / S)
	}
	return f
}
