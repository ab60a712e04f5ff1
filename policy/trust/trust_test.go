package trust

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const eps = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= eps*max(1, math.Abs(a), math.Abs(b)) }

func TestCompare(t *testing.T) {
	for _, c := range []struct{ i, j, want float64 }{
		{800, 500, 0}, // i's greater
		{500, 500, 1}, // equal
		{500, 800, 3}, // i's smaller
		{0, 800, 1},   // unknown compares as equal
		{800, 0, 1},
		{-1, 800, 1},
		{math.NaN(), 800, 1},
	} {
		if got := Compare(c.i, c.j); got != c.want {
			t.Errorf("Compare(%v, %v) = %v, want %v", c.i, c.j, got, c.want)
		}
	}
}

func TestQoS(t *testing.T) {
	m := DefaultModel()
	a500 := Node{Name: "a", Area: "A", Power: 500}
	a800 := Node{Name: "b", Area: "A", Power: 800}
	b800 := Node{Name: "c", Area: "B", Power: 800}
	for _, c := range []struct {
		name string
		i, j Node
		want float64
	}{
		{"same area, j stronger: 0.7·3 + 0.3·1", a500, a800, 2.4},
		{"same area, i stronger: 0.7·0 + 0.3·1", a800, a500, 0.3},
		{"other area, j stronger: 0.3·3 + 0.7·1", a500, b800, 1.6},
		{"other area, equal power: 0.3·1 + 0.7·1", a800, b800, 1},
		{"bandwidth weighs more between areas: 0.3·1 + 0.7·3", Node{Area: "A", Bandwidth: 1e6}, Node{Area: "B", Bandwidth: 1e8}, 2.4},
		{"no area is an area of its own", Node{Power: 500}, Node{Power: 800}, 1.6},
	} {
		if got := m.QoS(c.i, c.j); !near(got, c.want) {
			t.Errorf("%s: QoS = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRho(t *testing.T) {
	m := DefaultModel()
	half := m
	half.Unreachable = 0.5
	for _, c := range []struct {
		m    Model
		o    Outcomes
		want float64
	}{
		{m, Outcomes{}, 0},
		{m, Outcomes{Completed: 3, Failed: 1}, 0.25},
		{m, Outcomes{Completed: 1, Failed: 1, Unreachable: 2}, 0.75},
		{half, Outcomes{Completed: 1, Failed: 1, Unreachable: 2}, 2.0 / 3},
		{m, Outcomes{Failed: 4}, 1},
		{m, Outcomes{Completed: 7}, 0},
	} {
		if got := c.m.Rho(c.o); !near(got, c.want) {
			t.Errorf("Rho(%+v) with Unreachable %v = %v, want %v", c.o, c.m.Unreachable, got, c.want)
		}
	}
}

// fourNodes: a and b and c in area A, d in B; a is the weakest.
func fourNodes() (map[string]Node, map[Key]Outcomes) {
	nodes := map[string]Node{
		"a": {Area: "A", Power: 500},
		"b": {Area: "A", Power: 800},
		"c": {Area: "A", Power: 800},
		"d": {Area: "B", Power: 500},
	}
	out := map[Key]Outcomes{
		{"a", "b"}: {Completed: 3, Failed: 1}, // ρ(a,b) = 0.25
		{"a", "c"}: {Failed: 1},               // a's one try with c failed
		{"c", "b"}: {Completed: 1, Failed: 1}, // ρ(c,b) = 0.5
	}
	return nodes, out
}

func TestDirectIndirectTrust(t *testing.T) {
	m := DefaultModel()
	nodes, out := fourNodes()
	// Direct(a,b) = 2.4·(1 − 0.25); Direct(b,a) = 0.3·1; Direct(c,b) = (0.7+0.3)·0.5;
	// Direct(d,b) = (0.3·3 + 0.7·1)·1.
	for _, c := range []struct {
		i, j string
		want float64
	}{{"a", "b", 1.8}, {"b", "a", 0.3}, {"c", "b", 0.5}, {"d", "b", 1.6}, {"a", "zz", 1}} {
		if got := m.Direct(nodes, out, c.i, c.j); !near(got, c.want) {
			t.Errorf("Direct(%s,%s) = %v, want %v", c.i, c.j, got, c.want)
		}
	}
	// β_(a,c) ∝ 1 − 1/(1+K) = 0.5, β_(a,d) ∝ 1: 1/3 and 2/3.
	bs := m.Betas(nodes, out, "a", "b")
	if len(bs) != 2 || !near(bs["c"], 1.0/3) || !near(bs["d"], 2.0/3) {
		t.Errorf("Betas(a,b) = %v, want c 1/3, d 2/3", bs)
	}
	// Without history every β is 1/m (m = the other nodes).
	if bs := m.Betas(nodes, nil, "a", "b"); !near(bs["c"], 0.5) || !near(bs["d"], 0.5) {
		t.Errorf("Betas without history = %v, want 1/2 each", bs)
	}
	// Indirect(a,b) = 1/3·0.5 + 2/3·1.6 = 3.7/3.
	if got := m.Indirect(nodes, out, "a", "b"); !near(got, 3.7/3) {
		t.Errorf("Indirect(a,b) = %v, want %v", got, 3.7/3)
	}
	// Trust = 0.7·1.8 + 0.3·3.7/3 = 1.63.
	if got := m.Trust(nodes, out, "a", "b"); !near(got, 1.63) {
		t.Errorf("Trust(a,b) = %v, want 1.63", got)
	}
	if got := m.Indirect(map[string]Node{"a": {}, "b": {}}, out, "a", "b"); got != 0 {
		t.Errorf("Indirect with no third node = %v, want 0", got)
	}
}

func TestScoreHand(t *testing.T) {
	m := DefaultModel()
	sites := []Node{{Name: "x"}, {Name: "y"}, {Name: "z"}}
	for _, c := range []struct {
		name string
		out  map[Key]Outcomes
		want map[string]float64
	}{
		{"no history: all 1", nil, map[string]float64{"x": 1, "y": 1, "z": 1}},
		{"clean record: 1", map[Key]Outcomes{{"", "x"}: {Completed: 9}}, map[string]float64{"x": 1, "y": 1, "z": 1}},
		// x: broker w = 0.7, witnesses y, z (β 1/2 each, w = 0.15, no history).
		// R = (0.7·(0+1) + 0.15 + 0.15) / (0.7·(3+1) + 0.15 + 0.15) = 1/3.1.
		{"broker saw 3 failures at x", map[Key]Outcomes{{"", "x"}: {Failed: 3}},
			map[string]float64{"x": 0.05 + 0.95/3.1, "y": 1, "z": 1}},
		// y: broker no history (0.7/0.7), x testifies F=2 (w 0.15: 0.15·1 / 0.15·3), z 0.15/0.15.
		// R = 1/1.3.
		{"x saw 2 failures at y", map[Key]Outcomes{{"x", "y"}: {Failed: 2}},
			map[string]float64{"x": 1, "y": 0.05 + 0.95/1.3, "z": 1}},
		// an unreachable counts as a failure by default
		{"unreachable", map[Key]Outcomes{{"", "x"}: {Unreachable: 3}},
			map[string]float64{"x": 0.05 + 0.95/3.1, "y": 1, "z": 1}},
	} {
		got := m.Scores(Node{Name: "broker"}, sites, c.out)
		if len(got) != len(c.want) {
			t.Errorf("%s: Scores = %v, want %v", c.name, got, c.want)
		}
		for n, w := range c.want {
			if !near(got[n], w) {
				t.Errorf("%s: score[%s] = %v, want %v", c.name, n, got[n], w)
			}
		}
	}
}

// With Beta = 0 and Prior = 0 the score is the paper's Direct_Trust over its
// failure-free value, mapped onto [Floor, 1].
func TestScoreIsNormalisedDirect(t *testing.T) {
	m := DefaultModel()
	m.Beta, m.Prior = 0, 0
	nodes, out := fourNodes()
	for _, k := range []Key{{"a", "b"}, {"c", "b"}, {"a", "c"}, {"d", "a"}} {
		i, j := nodes[k.From], nodes[k.To]
		r := m.Direct(nodes, out, k.From, k.To) / m.QoS(i, j)
		if got, want := m.Score(nodes, out, k.From, k.To), m.Floor+(1-m.Floor)*r; !near(got, want) {
			t.Errorf("Score%v = %v, want Floor + (1−Floor)·Direct/QoS = %v", k, got, want)
		}
	}
}

// A failing site is below a clean one, more failures never raise its score,
// and it tends to Floor without reaching 0.
func TestScoreFailuresTendToFloor(t *testing.T) {
	m := DefaultModel()
	sites := []Node{{Name: "bad", Power: 800}, {Name: "good", Power: 500}}
	prev := 1.0
	for _, f := range []int{0, 1, 2, 5, 10, 100, 1000, 1e6} {
		out := map[Key]Outcomes{{"", "bad"}: {Failed: float64(f)}, {"", "good"}: {Completed: 5}}
		s := m.Scores(Node{}, sites, out)
		if s["good"] != 1 {
			t.Errorf("clean site scores %v, want 1", s["good"])
		}
		if f > 0 && !(s["bad"] < s["good"]) {
			t.Errorf("%d failures: bad %v not below good %v", f, s["bad"], s["good"])
		}
		if s["bad"] > prev || s["bad"] <= 0 {
			t.Errorf("%d failures: score %v, previous %v: want non-increasing and > 0", f, s["bad"], prev)
		}
		prev = s["bad"]
	}
	if prev-m.Floor > 1e-3 {
		t.Errorf("after 1e6 failures the score is %v, want within 1e-3 of Floor %v", prev, m.Floor)
	}
	// one failure lowers but does not floor a site (Prior 1): R = 1/(1 + 0.7·1)
	one := m.Scores(Node{}, sites, map[Key]Outcomes{{"", "bad"}: {Failed: 1}})["bad"]
	if want := 0.05 + 0.95/1.7; !near(one, want) {
		t.Errorf("one failure: score %v, want %v", one, want)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultModel().Validate(); err != nil {
		t.Fatalf("DefaultModel: %v", err)
	}
	for name, f := range map[string]func(*Model){
		"Alpha":          func(m *Model) { m.Alpha = 0 },
		"Beta":           func(m *Model) { m.Beta = -1 },
		"Floor":          func(m *Model) { m.Floor = 0 },
		"Prior":          func(m *Model) { m.Prior = math.NaN() },
		"Unreachable":    func(m *Model) { m.Unreachable = -0.5 },
		"ClusterWeights": func(m *Model) { m.ClusterWeights = [2]float64{0, 0} },
		"AreaWeights":    func(m *Model) { m.AreaWeights = [2]float64{-1, 2} },
	} {
		m := DefaultModel()
		f(&m)
		err := m.Validate()
		if !errors.Is(err, ErrModel) {
			t.Errorf("%s: Validate = %v, want ErrModel", name, err)
		} else if !contains(err.Error(), name) {
			t.Errorf("%s: error %q does not name the field", name, err)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// genWorld draws sites and outcomes; broker-only restricts outcomes to From = "".
func genWorld(t *rapid.T, brokerOnly bool) ([]Node, map[Key]Outcomes) {
	n := rapid.IntRange(1, 8).Draw(t, "sites")
	sites := make([]Node, n)
	for x := range sites {
		sites[x] = Node{
			Name:      fmt.Sprintf("s%d", x),
			Area:      rapid.SampledFrom([]string{"", "A", "B"}).Draw(t, "area"),
			Power:     float64(rapid.IntRange(0, 3).Draw(t, "power")) * 100,
			Bandwidth: float64(rapid.IntRange(0, 3).Draw(t, "bw")) * 1e6,
		}
	}
	out := map[Key]Outcomes{}
	for k := rapid.IntRange(0, 12).Draw(t, "keys"); k > 0; k-- {
		from := ""
		if !brokerOnly {
			if f := rapid.IntRange(-1, n-1).Draw(t, "from"); f >= 0 {
				from = sites[f].Name
			}
		}
		to := sites[rapid.IntRange(0, n-1).Draw(t, "to")].Name
		out[Key{from, to}] = Outcomes{
			// Decayed counts are fractional: draw some of those too.
			Completed:   float64(rapid.IntRange(0, 20).Draw(t, "c")) * rapid.SampledFrom([]float64{1, 1, 0.37}).Draw(t, "cw"),
			Failed:      float64(rapid.IntRange(0, 20).Draw(t, "f")) * rapid.SampledFrom([]float64{1, 1, 0.61}).Draw(t, "fw"),
			Unreachable: float64(rapid.IntRange(0, 5).Draw(t, "u")),
		}
	}
	return sites, out
}

func genModel(t *rapid.T) Model {
	m := DefaultModel()
	m.Alpha = rapid.Float64Range(0.01, 1).Draw(t, "alpha")
	m.Beta = rapid.Float64Range(0, 1).Draw(t, "beta")
	m.Prior = rapid.Float64Range(0, 3).Draw(t, "prior")
	m.Floor = rapid.Float64Range(0.001, 0.5).Draw(t, "floor")
	m.Unreachable = rapid.Float64Range(0, 2).Draw(t, "unreachable")
	return m
}

func TestScoresProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		sites, out := genWorld(t, false)
		s := m.Scores(Node{Power: 200}, sites, out)
		nodes := map[string]Node{"": {Power: 200}}
		for _, n := range sites {
			nodes[n.Name] = n
		}
		for _, n := range sites {
			v := s[n.Name]
			if !(v > 0 && v <= 1) || v < m.Floor {
				t.Fatalf("score[%s] = %v, want in [Floor %v, 1]", n.Name, v, m.Floor)
			}
			// Scores and Score agree to the bit (Scores keys the broker as "").
			if w := m.Score(nodes, out, "", n.Name); w != v {
				t.Fatalf("Scores[%s] = %v but Score = %v", n.Name, v, w)
			}
		}
		// Deterministic, whatever the order of the sites.
		rev := append([]Node(nil), sites...)
		for a, b := 0, len(rev)-1; a < b; a, b = a+1, b-1 {
			rev[a], rev[b] = rev[b], rev[a]
		}
		s2 := m.Scores(Node{Power: 200}, rev, out)
		for k, v := range s {
			if s2[k] != v {
				t.Fatalf("score[%s] = %v then %v", k, v, s2[k])
			}
		}
		// No outcomes: all 1.
		for k, v := range m.Scores(Node{Power: 200}, sites, nil) {
			if v != 1 {
				t.Fatalf("no history: score[%s] = %v, want 1", k, v)
			}
		}
	})
}

func TestScoresMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		sites, out := genWorld(t, false)
		before := m.Scores(Node{}, sites, out)
		// Add failures (or unreachables) to one pair x→j.
		from := ""
		if f := rapid.IntRange(-1, len(sites)-1).Draw(t, "from"); f >= 0 {
			from = sites[f].Name
		}
		to := sites[rapid.IntRange(0, len(sites)-1).Draw(t, "to")].Name
		add := Outcomes{Failed: float64(rapid.IntRange(0, 5).Draw(t, "addF")), Unreachable: float64(rapid.IntRange(0, 5).Draw(t, "addU"))}
		worse := clone(out)
		worse[Key{from, to}] = worse[Key{from, to}].Add(add)
		after := m.Scores(Node{}, sites, worse)
		// Monotone up to rounding: the scores are sums of products, and
		// adding to one pair may reorder them by an ulp (rapid found
		// 0.999999999254942 → 0.9999999992549419).
		const ulps = 1e-12
		if after[to] > before[to]+ulps {
			t.Fatalf("adding %+v to %q→%q raised its score %v → %v", add, from, to, before[to], after[to])
		}
		// A completion never lowers it.
		better := clone(out)
		better[Key{from, to}] = better[Key{from, to}].Add(Outcomes{Completed: 1})
		if b := m.Scores(Node{}, sites, better); b[to] < before[to]-ulps {
			t.Fatalf("a completion at %q→%q lowered its score %v → %v", from, to, before[to], b[to])
		}
	})
}

// When only the broker's own outcomes are known (what the daemon records),
// a failure anywhere never raises any site's score.
func TestScoresMonotoneBrokerOnly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		sites, out := genWorld(t, true)
		before := m.Scores(Node{}, sites, out)
		to := sites[rapid.IntRange(0, len(sites)-1).Draw(t, "to")].Name
		worse := clone(out)
		worse[Key{"", to}] = worse[Key{"", to}].Add(Outcomes{Failed: 1})
		after := m.Scores(Node{}, sites, worse)
		for k, v := range after {
			if v > before[k] {
				t.Fatalf("a failure at %q raised %q's score %v → %v", to, k, before[k], v)
			}
		}
		if after[to] >= before[to] && before[to] > m.Floor+1e-9 {
			t.Fatalf("a failure at %q left its score at %v (was %v)", to, after[to], before[to])
		}
	})
}

func clone(out map[Key]Outcomes) map[Key]Outcomes {
	c := make(map[Key]Outcomes, len(out))
	for k, v := range out {
		c[k] = v
	}
	return c
}

// benchWorld: n sites in areas of 50, every site used by the broker and a
// sprinkling of migrations between sites.
func benchWorld(n int) ([]Node, map[Key]Outcomes) {
	r := rand.New(rand.NewPCG(7, 7))
	sites := make([]Node, n)
	out := map[Key]Outcomes{}
	for x := range sites {
		sites[x] = Node{Name: fmt.Sprintf("site%04d", x), Area: fmt.Sprintf("la%d", x/50), Power: float64(500 + r.IntN(300)), Bandwidth: float64(1+r.IntN(100)) * 1e6}
		out[Key{"", sites[x].Name}] = Outcomes{Completed: float64(r.IntN(100)), Failed: float64(r.IntN(10)), Unreachable: float64(r.IntN(3))}
	}
	for k := 0; k < 5*n; k++ {
		a, b := sites[r.IntN(n)].Name, sites[r.IntN(n)].Name
		out[Key{a, b}] = Outcomes{Completed: float64(r.IntN(10)), Failed: float64(r.IntN(3))}
	}
	return sites, out
}

func BenchmarkScores1000(b *testing.B) {
	sites, out := benchWorld(1000)
	m := DefaultModel()
	b.ReportAllocs()
	for b.Loop() {
		if s := m.Scores(Node{}, sites, out); len(s) != len(sites) {
			b.Fatalf("%d scores for %d sites", len(s), len(sites))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(sites)), "ns/site")
}

// Decay halves a count every half-life, and leaves it alone without one.
func TestDecay(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		v        float64
		elapsed  time.Duration
		halfLife time.Duration
		want     float64
	}{
		{8, 0, day, 8},
		{8, day, day, 4},
		{8, 3 * day, day, 1},
		{8, day / 2, day, 8 / math.Sqrt2},
		{8, day, 0, 8},
		{8, day, -day, 8},
		{8, -day, day, 8},
		{0, day, day, 0},
	} {
		if got := Decay(c.v, c.elapsed, c.halfLife); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Decay(%v, %v, %v) = %v, want %v", c.v, c.elapsed, c.halfLife, got, c.want)
		}
	}
}
