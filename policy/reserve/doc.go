// Package reserve is the dynamic advance reservation mechanism (DRRM) of
// paper 001 (SPEC.md §2), pure and deterministic: no clock, no goroutines, no
// global randomness. The broker asks it whether to admit a reservation, and
// at the reservation's start where to bind it.
//
// # The resource–reservation graph
//
// Graph is the RRG <R, Q, E>: an edge joins reservation q and resource r iff
// r satisfies q (r.Level >= q.Demand, r.Capacity >= q.Width, and r is in
// q.Allowed when that is given). Reservations are kept in et order, ties in
// admission order. α(q_k) is the earlier reservations whose window reaches
// q_k's et (q_j.lt >= q_k.et); β(q_k) the later ones starting by q_k's lt.
//
//	freeDeg(q_k) = deg(q_k) − min(T1, T2)
//	T1 = Σ_{r∈λ(q_k)} [r possibly taken by α(q_k)]
//	T2 = Σ_{q∈α(q_k)} sgn(Σ_{r∈λ(q_k)} c_qr)   (the paper's second term)
//
// Admit is addQNode: insert q_k, accept iff inequality (1) holds,
// freeDeg(q_k) · Π_{q_m∈β(q_k)} freeDeg(q_m) > 0; a refused request leaves
// the graph as it was. Remove is §2.3, AddResource §2.4 (edges to unbound
// reservations only), FailResource the rule of the paper's figure 2, and
// SetCapacity (a site that grew or shrank, which the paper does not have)
// applies that rule to the reservations a shrink may no longer hold.
//
// # Generalisation to capacities
//
// The paper's resources run one job at a time and a reservation wants one of
// them. gridsub's sites have many nodes and a reservation may want several,
// all on one resource. The first term becomes: r counts as possibly taken
// for q_k when q_k.Width plus the widths of the α(q_k) members adjacent to r
// exceed r.Capacity. With Capacity = Width = 1 this is exactly
// sgn(Σ_{q∈α(q_k)} c_qr) (TestPaperFormulaUnit checks it against a direct
// transcription). The second term is the paper's. A reservation already bound
// holds its resource whatever the order: it counts in α of every unbound
// reservation whose window meets its own, and its own freeDeg is 1.
//
// # Binding (deleteEdge)
//
// Bind runs at the reservation's start. For each candidate resource, in index
// order, it finds the earliest start in [max(et, now), lt − dur] at which the
// running non-reserved jobs not yet ended (each ends at now + Expected −
// Elapsed) plus the holds of bound reservations plus q's width fit the
// capacity over the whole run. With unit widths that is the paper's test
// q.lt − q.et − q.dur >= et_kj − pt_kj with start q.et + et_kj − pt_kj. The
// resource with the smallest such delay wins (cost 0), ties to the lower index
// (the paper takes the first one in index order). When no resource can wait,
// each one offers to start at et, keeping its bound holds (never preempted)
// and preempting (restart, not resume) the cheapest set of running jobs that
// frees enough nodes, the kept jobs counted busy for the whole run; cost =
// w_r · Σ elapsed seconds of the preempted jobs, the exact minimum over sets
// (a covering knapsack over nodes). The least cost wins, ties to the lower
// index. The reservation then holds Width nodes over [Start, Start+Dur); its
// other edges go, and the edge from the chosen resource to an unbound
// reservation of β(q) goes when the resource's capacity minus the widths of
// the bound holds meeting that reservation's window is less than its width
// (unit case: the paper's "delete r_m's edges to β(q)", for every member whose
// window the hold meets). A bound reservation holds its resource whatever the
// et order, so Bind prefers, in the order above, a candidate after which no
// unbound reservation whose window meets q's is left with freeDeg 0 (binding
// out of et order could do that); only when every candidate would, it takes
// the best one anyway, since q is due, and names the stranded one in the
// Reason. Bind in et order, as the paper does.
//
// # The baseline
//
// Static is SRRM: bind at admission. Each resource has a reservation queue of
// booked holds; a request is admitted iff a candidate has room for it within
// its window, and is booked there at the earliest start with room.
// StaticRandom (r_schedule) picks a candidate with room at random (seeded
// PCG); StaticMinCost (m_schedule) the one whose predicted preemption cost at
// its booked start, from the jobs running at admission, is least. At the
// start, Static.Bind applies the same wait-or-preempt rule on that one
// resource. Static.Admit takes the jobs running at admission (for
// m_schedule's forecast: those due to end before the start are gone, the
// others have run that much longer) and returns the booking as a Binding;
// call Static.Bind at its booked Start. As policy.ReservationBooks
// (DRRM, SRRM), GraphBook and StaticBook also answer policy.BookedStart:
// the start to bind at (SRRM's booking, DRRM's ET until bound). Static.FailResource is SRRM's failure
// rule (§3.4): everything booked on the failed resource fails with it.
//
// # Numbers
//
// TestDirectionSynthetic drives all three through the paper's synthetic
// setup (25 resources, 200 requests, mean gap 2 s, five seeds) and checks
// the paper's direction: DRRM admits fewer but its total preemption cost is
// far lower than both SRRM variants' (go test -run Direction -v shows AP, PP
// and TPC). BenchmarkAdmit100x1000 times one admission test at 100 resources
// and 1,000 admitted reservations, BenchmarkBind100x1000 one binding in et
// order there.
//
// Errors of Bind wrap the sentinels ErrUnknown, ErrBound, ErrTooLate and
// ErrNoResource; every refusal and every choice carries a reason in words.
package reserve
