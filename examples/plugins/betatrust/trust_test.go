package betatrust

import (
	"math"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/policytest"
)

func TestScores(t *testing.T) {
	in := &policy.TrustInput{Observer: policy.TrustNode{Name: ""},
		Sites: []policy.TrustNode{{Name: "clean"}, {Name: "flaky"}, {Name: "unseen"}, {Name: "gossip"}},
		Outcomes: map[policy.TrustKey]policy.Outcomes{
			{From: "", To: "clean"}:       {Completed: 10},
			{From: "", To: "flaky"}:       {Completed: 2, Failed: 3, Unreachable: 1},
			{From: "clean", To: "gossip"}: {Failed: 4},
		}}
	got, err := New().Scores(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"clean": 1, "flaky": 4.0 / 8, "unseen": 1, "gossip": 2.0 / 4}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-15 {
			t.Errorf("%s: %v, want %v", k, got[k], w)
		}
	}
	if _, err := (Model{Witness: 2}).Scores(in); err == nil {
		t.Error("a witness weight of 2 is accepted")
	}
}

func TestDecay(t *testing.T) {
	o := policy.Outcomes{Completed: 8, Failed: 4, Unreachable: 2}
	if got := New().Decay(o, 2*time.Hour, time.Hour); got != (policy.Outcomes{Completed: 2, Failed: 1, Unreachable: 0.5}) {
		t.Errorf("two half-lives: %v", got)
	}
	if got := New().Decay(o, time.Hour, 0); got != o {
		t.Errorf("no half-life: %v", got)
	}
}

// TestContract: the model keeps policy.Trust's contract (policy/policytest).
func TestContract(t *testing.T) { policytest.Trust(t, New()) }
