// Package trust computes per-site trust after paper 002 (Huang & Zeng,
// "Trust mechanism-based dynamic task scheduling in grid computing", SPEC.md
// §3) and holds the paper's Trust-Min-min scheduler with plain Min-min as its
// baseline.
//
// Trust. Between two nodes i and j (clusters, or the broker and a site):
//
//	Direct_Trust(i,j)   = (Σ_k ω_k·p_k(i,j)) · (1 − ρ(i,j))
//	Indirect_Trust(i,j) = Σ_{k≠i,j} β_(i,k) · Direct_Trust(k,j),  Σβ = 1
//	Trust(i,j)          = α·Direct_Trust(i,j) + β·Indirect_Trust(i,j)
//
// p_k compares QoS parameter k (power, bandwidth): 0 if i's is greater, 1 if
// equal, 3 if smaller; ω weighs compute more inside a local area and
// bandwidth more between areas; ρ(i,j) is the failure rate of work moved from
// i to j, learned from Outcomes. Model.Direct, Model.Indirect and Model.Trust
// are these formulas as written. Model.Score and Model.Scores normalise trust
// into (0,1] for use as a divisor on predicted completion time (policy.Site.Trust,
// where 0 means unset): 1 with no history or a clean record, falling with
// failures toward Model.Floor, never 0. Model.Score says exactly how.
//
// Scheduling. MinMin maps a batch of independent tasks onto clusters by the
// paper's MCT = max(Data-START, START) + TRAN + ETC; given a trust function it
// is Trust-Min-min (QoS classes in order, LA level then cluster level, MCT
// divided by trust), without one plain Min-min.
//
// MinMinLevels takes a separate trust between local areas for the LA level.
// Planner is Trust-Min-min as a policy.Planner (sites as clusters, the
// broker's per-site trust), which gridsub sim's replay runs as the policy
// "trust-min-min"; simbackend/trustsim runs the paper's experiment with it.
//
// Everything here is pure: no I/O, no clock, no randomness; map inputs are
// read in sorted order so equal inputs give bit-equal outputs.
package trust
