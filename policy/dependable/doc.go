// Package dependable is paper 004's reliability model (Tao & Shi, "Dependable
// grid job scheduling mechanism", SPEC.md §5): QoS tiers from deadlines, a
// per-site Markov chain over time-to-failure (TTF) that predicts how likely a
// site is to stay up for a job's whole completion time, the reliability cost
// RC that ranks sites by it, and the placement stages built on them
// (Algorithm 1, and the baselines Min-min and Refine).
//
// # Tiers
//
// Tier derives a job's tier from its deadline t_d, its arrival t_a and its
// minimum completion time CT_min, with the adjustment λ (DefaultLambda, 1.5
// as in the paper's experiments):
//
//	no deadline                      → none
//	t_d ≤ t_a + (1+λ)·CT_min         → high  (a tight deadline)
//	t_d > t_a + (1+λ)·CT_min         → low   (a loose deadline)
//
// The paper's text calls the strict-deadline jobs "high" but its inequalities
// (9) and (10) say the opposite; SPEC.md §5 decides for the text: the tighter
// deadline is the high tier. Tier returns the reason in words with the
// numbers, for `gridsub status` and events.
//
// # Availability prediction
//
// Each site has a Chain. When the site fails, the time it had been up (its
// TTF) is merged into the nearest state S_k if |S_k − TTF| < Threshold (the
// state becomes the running mean of the TTFs merged into it), else it becomes
// a new state (beyond MaxStates it is merged into the nearest state
// whatever the distance, so the chain stays bounded). The transition count
// n_qk from the previous failure's state q to this one's k is incremented;
// Q_qk = n_qk / Σ_k n_qk (equation 5).
//
// The reliability of a job needing d more time on a site that has been up for
// age (T_now − ST_j, ST_j the time the site last came up), with q the state of
// its last failure, is equation (12):
//
//	r = Σ_{k: S_k > age + d} S_k·Q_qk / Σ_h S_h·Q_qh
//
// Where the paper is silent, this package decides (and Predictor's doc says
// so): a site never seen failing has r = 1 (no evidence against it); a site
// that is down has r = 0; when the current state q has no observed successor
// yet (its row of n is empty) the row is replaced by the states' visit
// counts (the chain's stationary estimate), so a site with one failure is not
// treated as perfect.
//
// RC = (1 − r)·CT (equation 13) with CT = run + transfer + queue length
// (equation 7). The success probability of equation (6) is ξ·e^{−RC}; only
// its ordering matters, so nothing here needs ξ.
//
// Predictor keeps one chain per site, fed by Observe(site, Up|Down|Fail, at),
// and marshals its whole learned state to JSON (and validates it when
// reading it back) so a store can persist it across restarts.
//
// Everything here is pure and deterministic: no wall clock (every time is an
// argument), no randomness, map keys read in sorted order.
package dependable
