package trust

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Sentinel errors. Every error this package returns wraps one of them.
var (
	// ErrModel: a Model field is out of range (Validate says which).
	ErrModel = errors.New("trust: invalid model")
	// ErrGrid: a Grid for MinMin is unusable (no clusters, a cluster without
	// power, two clusters with one name).
	ErrGrid = errors.New("trust: invalid grid")
	// ErrTask: a Task for MinMin is unusable (negative work or data, an
	// unknown source, an unknown QoS class).
	ErrTask = errors.New("trust: invalid task")
	// ErrTrust: the trust function given to MinMin returned a value outside
	// (0, +Inf).
	ErrTrust = errors.New("trust: invalid trust value")
)

// Node is one cluster (a gridsub site) or the broker itself, with its QoS
// parameters.
type Node struct {
	Name      string
	Area      string  // local area (LA) it belongs to; "" = its own
	Power     float64 // compute power, e.g. nodes / h (bigger = better); <= 0 = unknown (compares as equal)
	Bandwidth float64 // bytes/s to the broker as measured; <= 0 = unknown (compares as equal)
}

// Outcomes counts what happened to work moved from one node to another
// (From = "" is the broker / the user's machine; To = a site): tasks that
// completed, tasks that failed (job failures, transfer failures), and
// unreachable events (a probe or submission that could not reach the site).
// Counts may be fractional: decayed counts (Decay) weigh old outcomes less.
type Outcomes struct{ Completed, Failed, Unreachable float64 }

// Decay is what a count v weighs after elapsed time with the given
// half-life: v·2^(−elapsed/halfLife). A half-life of 0 or less, or no
// elapsed time, leaves v as it is (outcomes never age).
func Decay(v float64, elapsed, halfLife time.Duration) float64 {
	if halfLife <= 0 || elapsed <= 0 {
		return v
	}
	return v * math.Exp2(-float64(elapsed)/float64(halfLife))
}

// Add returns the sum of two counts.
func (o Outcomes) Add(p Outcomes) Outcomes {
	return Outcomes{o.Completed + p.Completed, o.Failed + p.Failed, o.Unreachable + p.Unreachable}
}

// Key names the pair (From, To) an Outcomes belongs to.
type Key struct{ From, To string }

// Model holds the constants of the trust model. The paper gives no numbers
// for any of them; DefaultModel says which were chosen and why.
type Model struct {
	// Trust = Alpha·Direct + Beta·Indirect. Alpha > 0, Beta >= 0.
	Alpha, Beta float64
	// ClusterWeights are ω for (power, bandwidth) between two nodes of one
	// local area: compute weighs more.
	ClusterWeights [2]float64
	// AreaWeights are ω for (power, bandwidth) between nodes of different
	// local areas (and between the broker and a site): bandwidth weighs more.
	AreaWeights [2]float64
	// Unreachable is how much one unreachable event counts as a failure in ρ
	// (1 = as much as a failed task). >= 0.
	Unreachable float64
	// Prior is K, pseudo-completions: each observer starts with K in β
	// adaptation, and Score adds K of the weight of one equal node (not in
	// Rho, which is the paper's plain rate). With K > 0 one failure lowers a
	// score without flooring it, and a site that always fails approaches the
	// floor as its failures pile up. >= 0.
	Prior float64
	// Floor is the score of a site with nothing but failures, in (0, 1).
	// Score maps the pooled success rate R in [0,1] to Floor + (1-Floor)·R.
	Floor float64
}

// DefaultModel returns the constants gridsub uses. The paper (Huang & Zeng
// 2006) fixes none of them, so these are choices:
//
//   - Alpha 0.7, Beta 0.3: a node's own experience weighs more than hearsay.
//   - ClusterWeights (0.7, 0.3), AreaWeights (0.3, 0.7): the paper only says
//     which weighs more at which level; each pair sums to 1, so the QoS term
//     Σω·p lies in [0, 3] and is 1 between equals.
//   - Unreachable 1: the paper counts a node leaving the grid as a failure.
//   - Prior 1: one pseudo-completion (see Model.Prior): with only the
//     broker's outcomes, one failure of one task scores 0.05 + 0.95/1.7 ≈ 0.61.
//   - Floor 0.05: a hopeless site costs at most 20× its predicted time.
func DefaultModel() Model {
	return Model{
		Alpha:          0.7,
		Beta:           0.3,
		ClusterWeights: [2]float64{0.7, 0.3},
		AreaWeights:    [2]float64{0.3, 0.7},
		Unreachable:    1,
		Prior:          1,
		Floor:          0.05,
	}
}

// Validate reports the first field out of range, wrapping ErrModel.
func (m Model) Validate() error {
	bad := func(name string, v float64, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrModel, name, v, want)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !finite(m.Alpha) || m.Alpha <= 0:
		return bad("Alpha", m.Alpha, "a finite number > 0")
	case !finite(m.Beta) || m.Beta < 0:
		return bad("Beta", m.Beta, "a finite number >= 0")
	case !finite(m.Unreachable) || m.Unreachable < 0:
		return bad("Unreachable", m.Unreachable, "a finite number >= 0")
	case !finite(m.Prior) || m.Prior < 0:
		return bad("Prior", m.Prior, "a finite number >= 0")
	case !finite(m.Floor) || m.Floor <= 0 || m.Floor >= 1:
		return bad("Floor", m.Floor, "a number in (0, 1)")
	}
	for _, c := range []struct {
		name string
		w    [2]float64
	}{{"ClusterWeights", m.ClusterWeights}, {"AreaWeights", m.AreaWeights}} {
		w := c.w
		if !finite(w[0]) || !finite(w[1]) || w[0] < 0 || w[1] < 0 || w[0]+w[1] <= 0 {
			return fmt.Errorf("%w: %s = %v, want two finite weights >= 0 with a positive sum", ErrModel, c.name, w)
		}
	}
	return nil
}

// Compare is the paper's p_k for one QoS parameter of i and j: 0 if i's is
// greater, 1 if equal, 3 if smaller. A parameter <= 0 or NaN on either side
// is unknown and compares as equal.
func Compare(i, j float64) float64 {
	switch {
	case !(i > 0) || !(j > 0) || i == j:
		return 1
	case i > j:
		return 0
	default:
		return 3
	}
}

// Weights returns the ω that apply between i and j: ClusterWeights when both
// name the same non-empty Area, AreaWeights otherwise.
func (m Model) Weights(i, j Node) [2]float64 {
	if i.Area != "" && i.Area == j.Area {
		return m.ClusterWeights
	}
	return m.AreaWeights
}

// QoS is Σ_k ω_k·p_k(i,j) over (power, bandwidth).
func (m Model) QoS(i, j Node) float64 {
	w := m.Weights(i, j)
	return w[0]*Compare(i.Power, j.Power) + w[1]*Compare(i.Bandwidth, j.Bandwidth)
}

// counts returns the failures f (Failed + Unreachable·weight) and the total
// n = Completed + f of o.
func (m Model) counts(o Outcomes) (f, n float64) {
	f = float64(o.Failed) + m.Unreachable*float64(o.Unreachable)
	return f, float64(o.Completed) + f
}

// Rho is ρ: the failure rate (Failed + Unreachable·m.Unreachable) / all of
// the work in o, 0 with no history (the paper's initial value).
func (m Model) Rho(o Outcomes) float64 {
	f, n := m.counts(o)
	if n <= 0 {
		return 0
	}
	return f / n
}

// reliability is 1 − f/(n+K): the success rate with K pseudo-completions, 1
// with no history.
func (m Model) reliability(o Outcomes) float64 {
	f, n := m.counts(o)
	if n+m.Prior <= 0 {
		return 1
	}
	return 1 - f/(n+m.Prior)
}

func node(nodes map[string]Node, name string) Node {
	if n, ok := nodes[name]; ok {
		n.Name = name
		return n
	}
	return Node{Name: name}
}

// Direct is Direct_Trust(i,j) = (Σ_k ω_k p_k(i,j)) · (1 − ρ(i,j)), ρ(i,j) =
// m.Rho(out[Key{i,j}]). A name missing from nodes is a node with unknown
// parameters in an area of its own.
func (m Model) Direct(nodes map[string]Node, out map[Key]Outcomes, i, j string) float64 {
	return m.QoS(node(nodes, i), node(nodes, j)) * (1 - m.Rho(out[Key{i, j}]))
}

// others returns the names in nodes other than i and j, sorted, so that every
// sum runs in one order whatever the map's.
func others(nodes map[string]Node, i, j string) []string {
	ks := make([]string, 0, len(nodes))
	for k := range nodes {
		if k != i && k != j {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// Betas returns β_(i,k) for every k in nodes other than i and j. The paper
// starts every β at 1/m and lets it change, Σβ = 1; here β_(i,k) is
// proportional to i's own experience of k (its success rate with K
// pseudo-completions: 1 − f/(n+K)), so with no history all are equal, and a
// node whose work for i failed weighs less as a witness. If every rate is 0
// the βs are equal again.
func (m Model) Betas(nodes map[string]Node, out map[Key]Outcomes, i, j string) map[string]float64 {
	ks := others(nodes, i, j)
	rel := make([]float64, len(ks))
	for x, k := range ks {
		rel[x] = m.reliability(out[Key{i, k}])
	}
	bs := betas(rel, -1)
	res := make(map[string]float64, len(ks))
	for x, k := range ks {
		res[k] = bs[x]
	}
	return res
}

// betas normalises rel (skipping index skip) to sum 1; equal shares when the
// sum is 0. The skipped entry is 0.
func betas(rel []float64, skip int) []float64 {
	sum, cnt := 0.0, 0
	for x, r := range rel {
		if x != skip {
			sum += r
			cnt++
		}
	}
	res := make([]float64, len(rel))
	for x, r := range rel {
		switch {
		case x == skip:
		case sum > 0:
			res[x] = r / sum
		default:
			res[x] = 1 / float64(cnt)
		}
	}
	return res
}

// Indirect is Indirect_Trust(i,j) = Σ_{k≠i,j} β_(i,k)·Direct_Trust(k,j),
// over the k in nodes, with β from Betas. 0 when there is no third node.
func (m Model) Indirect(nodes map[string]Node, out map[Key]Outcomes, i, j string) float64 {
	ks := others(nodes, i, j)
	rel := make([]float64, len(ks))
	for x, k := range ks {
		rel[x] = m.reliability(out[Key{i, k}])
	}
	bs := betas(rel, -1) // Betas, by index
	sum := 0.0
	for x, k := range ks {
		sum += bs[x] * m.Direct(nodes, out, k, j)
	}
	return sum
}

// Trust is the paper's Trust(i,j) = α·Direct_Trust(i,j) + β·Indirect_Trust(i,j),
// unnormalised: in [0, 3(α+β)] with the default weights. Use Score for a
// value in (0,1].
func (m Model) Trust(nodes map[string]Node, out map[Key]Outcomes, i, j string) float64 {
	return m.Alpha*m.Direct(nodes, out, i, j) + m.Beta*m.Indirect(nodes, out, i, j)
}

// Trusts is Trust(i, j) for every ordered pair of names in nodes (i = j
// included), equal to the last bit to calling Trust for each: the Direct
// terms and reliabilities are computed once for all pairs, and every sum
// runs over the names in the same sorted order as Trust's.
func (m Model) Trusts(nodes map[string]Node, out map[Key]Outcomes) map[Key]float64 {
	names := others(nodes, "", "")
	if _, ok := nodes[""]; ok { // others leaves the empty name out; Trust does not
		names = append([]string{""}, names...)
	}
	n := len(names)
	direct := make([]float64, n*n) // direct[a*n+b] = Direct(names[a], names[b])
	rel := make([]float64, n*n)    // rel[a*n+b] = reliability of out[Key{names[a], names[b]}]
	for a, x := range names {
		for b, y := range names {
			direct[a*n+b] = m.Direct(nodes, out, x, y)
			rel[a*n+b] = m.reliability(out[Key{x, y}])
		}
	}
	res := make(map[Key]float64, n*n)
	for i, x := range names {
		for j, y := range names {
			// betas(rel over k ≠ i, j, -1), then Σ β_k·Direct(k, j), in name order.
			sum, cnt := 0.0, 0
			for k := range names {
				if k != i && k != j {
					sum += rel[i*n+k]
					cnt++
				}
			}
			ind := 0.0
			for k := range names {
				if k == i || k == j {
					continue
				}
				b := 1 / float64(cnt)
				if sum > 0 {
					b = rel[i*n+k] / sum
				}
				ind += b * direct[k*n+j]
			}
			res[Key{x, y}] = m.Alpha*direct[i*n+j] + m.Beta*ind
		}
	}
	return res
}

// view is i's standpoint: the other observers (sorted by name) and how
// reliable i has found each of them. Score and Scores share it so that they
// agree to the last bit.
type view struct {
	m   Model
	i   Node
	obs []Node
	rel []float64 // rel[k] = reliability of out[Key{i, obs[k].Name}]
}

// witness is an observer with history toward the target.
type witness struct {
	k int // index into view.obs
	o Outcomes
}

// weight is an observer's QoS term as a weight: the paper's Σω·p, but never
// below a tenth of the weight between equals, so that an observer better than
// j in every parameter (Σω·p = 0) still counts and a failing site cannot hide
// behind it.
func (m Model) weight(x, j Node) float64 {
	w := m.Weights(x, j)
	return max(m.QoS(x, j), 0.1*(w[0]+w[1]))
}

// score is the normalised trust of v.i in jn (obs[jx] when jx >= 0), given
// i's own history with j and the witnesses (sorted by k, none equal to jx).
func (v *view) score(jx int, jn Node, direct Outcomes, wit []witness) float64 {
	m := v.m
	// β_(i,k) over every observer but j: the betas() rule without a slice.
	sum, cnt := 0.0, 0
	for k, r := range v.rel {
		if k != jx {
			sum += r
			cnt++
		}
	}
	prior := m.Prior * (m.Alpha + m.Beta)
	w := m.Alpha * m.weight(v.i, jn)
	f, n := m.counts(direct)
	num, den := prior+w*(n-f), prior+w*n
	for _, x := range wit {
		b := 1 / float64(cnt)
		if sum > 0 {
			b = v.rel[x.k] / sum
		}
		w = m.Beta * b * m.weight(v.obs[x.k], jn)
		f, n = m.counts(x.o)
		num += w * (n - f)
		den += w * n
	}
	r := 1.0
	if den > 0 {
		r = min(max(num/den, 0), 1)
	}
	fl := min(max(m.Floor, math.SmallestNonzeroFloat64), 1)
	return fl + (1-fl)*r
}

// Score is the trust of i in j normalised into (0,1]:
//
//	Score = Floor + (1 − Floor)·R
//	R     = (K·(α+β) + Σ_x w_x·C_x) / (K·(α+β) + Σ_x w_x·N_x)
//
// over the observers x with history toward j: i itself with w_i = α·q(i,j),
// and every other node k in nodes (k ≠ i, j) with w_k = β·β_(i,k)·q(k,j);
// N_x = all work x moved to j (unreachables weighted), C_x = the part that
// completed (N_x − F_x), K = Prior, β_(i,k) as in Betas, and q = the paper's
// Σω·p floored at a tenth of the weight between equals (so that an observer
// better than j in everything, p = 0, still counts). R is the paper's
// Trust(i,j) = α·Direct + β·Indirect divided by the same trust with every
// ρ = 0, except that each observer counts in proportion to its evidence N_x
// (an observer that never sent work to j has nothing to say, instead of
// saying "ρ = 0" and diluting those that have), plus K pseudo-completions of
// the weight of one equal node. With Beta = 0 and Prior = 0 it is exactly
// Direct_Trust(i,j) / Σω·p = 1 − ρ(i,j).
//
// Consequences: no history at all gives 1, and so does a clean record:
// parameters never lower a score, because a gridsub policy already charges
// for power and bandwidth in its predicted completion time and a divisor that
// did too would count them twice (they only weigh the witnesses). A failure in
// any Key{x, j} never raises j's score and a completion never lowers it; with
// only the broker's own outcomes (From = ""), a failure at one site leaves the
// others unchanged. A site that only fails tends to Floor as its failures
// grow (K/(K + N) of the way above it); never 0.
func (m Model) Score(nodes map[string]Node, out map[Key]Outcomes, i, j string) float64 {
	return m.scorer(nodes, out, i)(j)
}

// scorer is Score from i to any j: i's view (the observers other than i,
// sorted, and i's reliability of each) is built once.
func (m Model) scorer(nodes map[string]Node, out map[Key]Outcomes, i string) func(j string) float64 {
	ks := others(nodes, i, "")
	v := view{m: m, i: node(nodes, i), obs: make([]Node, len(ks)), rel: make([]float64, len(ks))}
	for x, k := range ks {
		v.obs[x] = node(nodes, k)
		v.rel[x] = m.reliability(out[Key{i, k}])
	}
	return func(j string) float64 {
		jx := -1
		var wit []witness
		for x, k := range ks {
			if k == j {
				jx = x
			} else if o, ok := out[Key{k, j}]; ok {
				wit = append(wit, witness{x, o})
			}
		}
		return v.score(jx, node(nodes, j), out[Key{i, j}], wit)
	}
}

// Scores returns every site's trust as the broker sees it: Score from the
// broker (outcome key From = "", whatever broker.Name says; its Power and
// Bandwidth may be left 0, unknown, which compares as equal to every site)
// to each site,
// with the sites as the other observers (migrations between sites recorded
// as Key{siteA, siteB} count as their testimony). Sites with an empty name
// are skipped; of two sites with one name the later wins; outcomes naming
// anything else are ignored. Deterministic, in [Floor, 1], 1 for every site
// when out holds nothing; O(n² + |out| log |out|) for n sites, the n² part
// being plain additions.
func (m Model) Scores(broker Node, sites []Node, out map[Key]Outcomes) map[string]float64 {
	byName := make(map[string]Node, len(sites))
	for _, s := range sites {
		if s.Name != "" {
			byName[s.Name] = s
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	idx := make(map[string]int, len(names))
	broker.Name = ""
	v := view{m: m, i: broker, obs: make([]Node, len(names)), rel: make([]float64, len(names))}
	for x, n := range names {
		idx[n] = x
		v.obs[x] = byName[n]
		v.rel[x] = m.reliability(out[Key{"", n}])
	}
	wits := make([][]witness, len(names))
	for key, o := range out {
		fx, okf := idx[key.From]
		tx, okt := idx[key.To]
		if okf && okt && fx != tx {
			wits[tx] = append(wits[tx], witness{fx, o})
		}
	}
	res := make(map[string]float64, len(names))
	for x, n := range names {
		w := wits[x]
		slices.SortFunc(w, func(a, b witness) int { return a.k - b.k })
		res[n] = v.score(x, v.obs[x], out[Key{"", n}], w)
	}
	return res
}
