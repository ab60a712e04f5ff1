package policyrpc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/feasible"
	"github.com/gridsub/gridsub/policy/reserve"
	"github.com/gridsub/gridsub/policy/trust"
)

var t0 = time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)

func snapshot(r *rand.Rand) *policy.Snapshot {
	s := &policy.Snapshot{Now: t0, MultiSite: 1.1}
	n := 2 + r.IntN(4)
	for i := range n {
		nodes := 8 << r.IntN(4)
		s.Sites = append(s.Sites, policy.Site{Name: fmt.Sprintf("s%d", i), Nodes: nodes, Free: r.IntN(nodes + 1), H: 0.5 + r.Float64(),
			Trust: r.Float64(), Shape: policy.NodeShape{Cores: 16, MemBytes: 64 << 30}})
	}
	s.Links = make([][]policy.Link, n)
	for i := range s.Links {
		s.Links[i] = make([]policy.Link, n)
		for k := range s.Links[i] {
			if i != k {
				s.Links[i][k] = policy.Link{SecPerByte: 1e-8, Latency: 50 * time.Millisecond}
			}
		}
	}
	for k := range 5 {
		s.Queue = append(s.Queue, policy.Job{ID: fmt.Sprintf("j%d", k), Width: 1 + r.IntN(40), Estimate: time.Duration(1+r.IntN(3600)) * time.Second,
			Submit: t0.Add(-time.Minute), Origin: r.IntN(n) - 1})
	}
	return s
}

func TestTrustShim(t *testing.T) {
	impl := trust.Policy{Model: trust.DefaultModel()}
	raw, _ := Test(t, plugins.KindTrust, impl)
	c := raw.(*TrustClient)
	if c.Name() != trust.BuiltinName {
		t.Errorf("name %q", c.Name())
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		in := &policy.TrustInput{Observer: policy.TrustNode{Name: ""}, Outcomes: map[policy.TrustKey]policy.Outcomes{}}
		for i := range 6 {
			in.Sites = append(in.Sites, policy.TrustNode{Name: fmt.Sprintf("s%d", i), Area: fmt.Sprint(i % 2), Power: r.Float64() * 100, Bandwidth: r.Float64() * 1e6})
		}
		for range 10 {
			k := policy.TrustKey{From: in.Sites[r.IntN(6)].Name, To: in.Sites[r.IntN(6)].Name}
			if r.IntN(3) == 0 {
				k.From = ""
			}
			in.Outcomes[k] = policy.Outcomes{Completed: r.Float64() * 10, Failed: r.Float64() * 3, Unreachable: float64(r.IntN(2))}
		}
		want, err := impl.Scores(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Scores(in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("scores differ:\n got %v\nwant %v", got, want)
		}
		o := in.Outcomes[policy.TrustKey{From: "", To: "s0"}]
		if g, w := c.Decay(o, 90*time.Minute, time.Hour), impl.Decay(o, 90*time.Minute, time.Hour); g != w {
			t.Fatalf("decay %v, want %v", g, w)
		}
	}
	// A broken model keeps its identity across the boundary.
	_, err := trustClient(t, trust.Policy{Model: trust.Model{}}).Scores(&policy.TrustInput{})
	if !errors.Is(err, trust.ErrModel) {
		t.Errorf("a broken model's error is %v, not trust.ErrModel", err)
	}
}

func trustClient(t *testing.T, impl policy.Trust) *TrustClient {
	raw, _ := Test(t, plugins.KindTrust, impl)
	return raw.(*TrustClient)
}

// TestSentinelsRoundTrip: every sentinel of the policy codec, wrapped and
// joined, comes back through a real gRPC connection matching itself.
func TestSentinelsRoundTrip(t *testing.T) {
	var next error
	c := trustClient(t, mockTrust{scores: func(*policy.TrustInput) (map[string]float64, error) { return nil, next }})
	for _, r := range wire.PolicyCodec.Rows() {
		if r.Sentinel == nil {
			continue
		}
		for _, e := range []error{r.Sentinel, fmt.Errorf("ctx: %w", r.Sentinel), errors.Join(errors.New("other"), fmt.Errorf("x: %w", r.Sentinel))} {
			next = e
			_, err := c.Scores(&policy.TrustInput{})
			var re *wire.RemoteError
			if !errors.Is(err, r.Sentinel) || !errors.As(err, &re) || re.Plugin != "mock-trust" || re.Method != "Scores" {
				t.Errorf("%v came back as %v", e, err)
			}
		}
	}
	next = errors.New("plain")
	if _, err := c.Scores(&policy.TrustInput{}); err == nil || errors.Is(err, policy.ErrResvBound) || err.Error() != "plain (plugin mock-trust, Scores)" {
		t.Errorf("a plain error came back as %v", err)
	}
}

// TestPluginGone: a plugin that stopped answers ErrPluginExited (retryable),
// and a method without an error result its safe value, with Err set.
func TestPluginGone(t *testing.T) {
	raw, server := Test(t, plugins.KindTrust, trust.Policy{Model: trust.DefaultModel()})
	c := raw.(*TrustClient)
	server.Stop()
	if _, err := c.Scores(&policy.TrustInput{}); !errors.Is(err, wire.ErrPluginExited) || !backends.Retryable(err) {
		t.Errorf("Scores on a stopped plugin: %v", err)
	}
	o := policy.Outcomes{Completed: 4}
	if got := c.Decay(o, time.Hour, time.Hour); got != o || !errors.Is(c.Err(), wire.ErrPluginExited) {
		t.Errorf("Decay on a stopped plugin: %v, Err %v", got, c.Err())
	}
}

func TestFeasibilityShim(t *testing.T) {
	raw, _ := Test(t, plugins.KindFeasibility, feasible.Check{})
	c := raw.(*FeasibilityClient)
	r := rand.New(rand.NewPCG(3, 4))
	for k := range 200 {
		s := snapshot(r)
		d := &policy.Demand{Width: 1 + r.IntN(100), Estimate: time.Duration(1+r.IntN(7200)) * time.Second, DataSize: int64(r.IntN(1 << 30)),
			NoSplit: r.IntN(2) == 0, BestEffort: r.IntN(3) == 0, PerNode: policy.NodeShape{Cores: r.IntN(24)}}
		if r.IntN(2) == 0 {
			d.Deadline = t0.Add(time.Duration(r.IntN(7200)) * time.Second)
		}
		if r.IntN(3) == 0 {
			d.Sites = []string{"s0", "s9"}
		}
		if r.IntN(2) == 0 {
			d.Origin = "s1"
		}
		want, werr := feasible.Check{}.Feasible(d, s)
		got, gerr := c.Feasible(d, s)
		if !reflect.DeepEqual(got, want) || (werr == nil) != (gerr == nil) {
			t.Fatalf("case %d: Feasible %+v %v, want %+v %v", k, got, gerr, want, werr)
		}
		wl, werr := feasible.Check{}.Late(d, s)
		gl, gerr := c.Late(d, s)
		if gl != wl || (werr == nil) != (gerr == nil) {
			t.Fatalf("case %d: Late %q %v, want %q %v", k, gl, gerr, wl, werr)
		}
	}
}

func TestAdmissionShim(t *testing.T) {
	for _, name := range reserve.Names() {
		t.Run(name, func(t *testing.T) {
			impl, err := reserve.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := Test(t, plugins.KindAdmission, impl)
			c := raw.(*AdmissionClient)
			if c.Name() != name {
				t.Errorf("name %q", c.Name())
			}
			res := []policy.ResvResource{{Name: "a", Capacity: 4, Level: 2}, {Name: "b", Capacity: 2, Level: 1, Cost: 2}, {Name: "c", Capacity: 1, Level: 3}}
			local, remote := impl.NewBook(res, 7), c.NewBook(res, 7)
			defer remote.(*Book).Close()
			r := rand.New(rand.NewPCG(5, 6))
			admitted, bound := 0, 0
			running := []policy.ResvRunning{{Resource: "a", Job: "x", Nodes: 2, Expected: time.Hour, Elapsed: 10 * time.Minute}}
			for k := range 60 {
				now := t0.Add(time.Duration(k) * time.Minute)
				switch r.IntN(5) {
				case 0, 1, 2:
					et := now.Add(time.Duration(r.IntN(120)) * time.Minute)
					q := policy.ResvRequest{ID: fmt.Sprintf("q%d", k), ET: et, LT: et.Add(time.Duration(30+r.IntN(120)) * time.Minute),
						Dur: 30 * time.Minute, Width: 1 + r.IntN(2), Demand: 1 + r.IntN(3)}
					if w, g := local.Admit(q, now, running), remote.Admit(q, now, running); !reflect.DeepEqual(w, g) {
						t.Fatalf("step %d: Admit %v, want %v", k, g, w)
					} else if w.Code == policy.Success {
						admitted++
					}
				case 3:
					ids := local.Reservations()
					id := "nope"
					if len(ids) > 0 && r.IntN(4) > 0 {
						id = ids[r.IntN(len(ids))]
					}
					wb, werr := local.Bind(id, now, running)
					gb, gerr := remote.Bind(id, now, running)
					if !reflect.DeepEqual(wb, gb) || (werr == nil) != (gerr == nil) {
						t.Fatalf("step %d: Bind %+v %v, want %+v %v", k, gb, gerr, wb, werr)
					}
					if werr == nil {
						bound++
					}
					for _, s := range []error{policy.ErrResvUnknown, policy.ErrResvBound, policy.ErrResvTooLate, policy.ErrResvNoResource} {
						if errors.Is(werr, s) != errors.Is(gerr, s) {
							t.Fatalf("step %d: Bind's error %v lost its identity %v (local %v)", k, gerr, s, werr)
						}
					}
				case 4:
					if ids := local.Reservations(); len(ids) > 0 {
						id := ids[r.IntN(len(ids))]
						local.Remove(id)
						remote.Remove(id)
					}
					capacity := 1 + r.IntN(2)
					if w, g := local.SetCapacity("b", capacity), remote.SetCapacity("b", capacity); !reflect.DeepEqual(w, g) {
						t.Fatalf("step %d: SetCapacity dropped %v, want %v", k, g, w)
					}
				}
				if w, g := local.Reservations(), remote.Reservations(); !reflect.DeepEqual(w, g) {
					t.Fatalf("step %d: Reservations %v, want %v (err %v)", k, g, w, remote.(*Book).Err())
				}
				sameBooked(t, fmt.Sprintf("step %d", k), local, remote, k)
			}
			if w, g := local.FailResource("a"), remote.FailResource("a"); !reflect.DeepEqual(w, g) {
				t.Fatalf("FailResource %v, want %v", g, w)
			}
			sameBooked(t, "after FailResource", local, remote, 60)
			if admitted == 0 || bound == 0 {
				t.Errorf("the sequence admitted %d and bound %d: it tests too little", admitted, bound)
			}
		})
	}
}

// sameBooked: the remote book answers policy.BookedStart as the local one
// for every request id asked so far (q0..q<n-1>: admitted, bound, removed,
// dropped or never admitted).
func sameBooked(t *testing.T, at string, local, remote policy.ReservationBook, n int) {
	t.Helper()
	lb, ok := local.(policy.BookedStart)
	if !ok {
		t.Fatalf("%T lacks policy.BookedStart", local)
	}
	rb := remote.(policy.BookedStart)
	for i := range n + 1 {
		id := fmt.Sprintf("q%d", i)
		wt, wok := lb.Booked(id)
		gt, gok := rb.Booked(id)
		if wok != gok || !wt.Equal(gt) {
			t.Fatalf("%s: Booked(%s) = %v %v, want %v %v", at, id, gt, gok, wt, wok)
		}
	}
}
