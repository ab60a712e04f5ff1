// Package faults injects site failures into the simulated testbed after the
// resource-log simulator paper 004 uses (SPEC.md §5): failure times from a
// Weibull distribution, spread over the sites by Zipf's law, repair times
// from a Pareto distribution.
//
//	time between two failures anywhere in the grid   Weibull  F(t) = 1 − e^{−(t/η)^α}
//	the site a failure hits (rank i of n)            Zipf     P(i) = K/i^β, K = 1/Σ_k k^−β
//	how long the site stays down                     Pareto   F(x) = 1 − (θ/x)^ω, x ≥ θ
//
// Schedule draws a whole failure log from an explicit seed (a PCG stream
// of its own: the same model, seed, sites and horizon give the same log,
// whatever else draws random numbers). The Zipf ranks are a permutation of
// the sites drawn from the same seed, so the most failure-prone site is not
// always the first one. A failure that hits a site already down is absorbed
// (a dead site cannot die again) and counted in Stats. With ω < 1 the
// Pareto mean is infinite, so repairs are capped at MaxRepair.
//
// Inject plays a log on an Engine: at each outage's start the site's Fail
// loses its queued and running jobs and refuses work, and at its end Repair
// lets it take work again; an optional callback hears each event (to feed
// a policy/dependable.Predictor, say).
//
// The paper's Table 1 is not self-consistent (its scale η = 18 000 and its
// shapes give a failure rate that matches neither printed arrival rate in
// any time unit), so a Model can instead be given the grid-wide failure rate
// and has η derived from it: RateScale. Paper004 gives the two models the
// experiments use and says which numbers come from where.
package faults
