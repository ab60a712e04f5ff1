package trustsim

import (
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/trust"
)

// askedTrust is paper 002's model, counting who asked.
type askedTrust struct {
	observers map[string]int
	failed    *float64
}

func (askedTrust) Name() string { return "asked" }
func (a askedTrust) Scores(in *policy.TrustInput) (map[string]float64, error) {
	a.observers[in.Observer.Name]++
	for _, o := range in.Outcomes {
		*a.failed += o.Failed
	}
	return trust.Policy{Model: trust.DefaultModel()}.Scores(in)
}
func (askedTrust) Decay(o policy.Outcomes, e, h time.Duration) policy.Outcomes { return o }

// Trust-Min-min-score learns through the configured trust policy, every
// cluster and every local area asking as itself, and an explicit paper-002
// policy gives the sequence of the default.
func TestSequenceAsksTheTrustPolicy(t *testing.T) {
	c := Default()
	c.Runs, c.Tasks = 5, 40
	c.Policy = TrustMinMinScore
	base := seq(t, c)
	a := askedTrust{observers: map[string]int{}, failed: new(float64)}
	c.Trust = a
	got := seq(t, c)
	if len(a.observers) != c.Clusters+c.Areas || a.observers["c00"] != c.Runs || a.observers["la0"] != c.Runs {
		t.Fatalf("observers asked: %v", a.observers)
	}
	if *a.failed == 0 {
		t.Fatal("the policy never saw a failure, though clusters fail every run")
	}
	for i := range base {
		if base[i].Makespan != got[i].Makespan || base[i].Migrations != got[i].Migrations {
			t.Fatalf("run %d: %+v with the default, %+v through the interface", i, base[i], got[i])
		}
	}
}
