package replay

import (
	"context"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/trust"
)

// recordingTrust is a policy.Trust that records what it was given and
// answers with fixed scores.
type recordingTrust struct {
	inputs *[]policy.TrustInput
	scores map[string]float64
}

func (recordingTrust) Name() string { return "recording" }
func (r recordingTrust) Scores(in *policy.TrustInput) (map[string]float64, error) {
	cp := policy.TrustInput{Observer: in.Observer, Sites: in.Sites, Outcomes: map[policy.TrustKey]policy.Outcomes{}}
	for k, v := range in.Outcomes {
		cp.Outcomes[k] = v
	}
	*r.inputs = append(*r.inputs, cp)
	return r.scores, nil
}
func (recordingTrust) Decay(o policy.Outcomes, elapsed, halfLife time.Duration) policy.Outcomes {
	return trust.Policy{}.Decay(o, elapsed, halfLife)
}

// trustSeer starts every job on site 0 when it has room and records the
// trust each planning pass saw.
type trustSeer struct{ seen *[][]float64 }

func (trustSeer) Name() string { return "trust-seer" }
func (p trustSeer) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	var tr []float64
	for _, st := range s.Sites {
		tr = append(tr, st.Trust)
	}
	*p.seen = append(*p.seen, tr)
	plan := &policy.Plan{}
	free := s.Sites[0].Free
	for _, j := range s.Queue {
		if j.Width <= free {
			free -= j.Width
			plan.Decisions = append(plan.Decisions, policy.Decision{Job: j.ID, Action: policy.Start,
				Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: j.Width}}, Immediate: true}})
		}
	}
	return plan, nil
}

// A replay with a trust policy feeds it every job's outcome at the sites
// it ran on, and the planner sees the policy's scores from the next pass.
func TestReplayLearnsTrust(t *testing.T) {
	jobs := []Job{
		{ID: "ok", Submit: 0, Width: 1, Estimate: time.Hour, Runtime: 10 * time.Minute, Origin: -1},
		{ID: "killed", Submit: time.Second, Width: 1, Estimate: time.Minute, Runtime: time.Hour, Origin: -1},
		{ID: "late", Submit: 3 * time.Hour, Width: 1, Estimate: time.Minute, Runtime: time.Minute, Origin: -1},
	}
	var inputs []policy.TrustInput
	var seen [][]float64
	res, err := Run(context.Background(), Setup{Sites: []Site{{"A", 2, 1}, {"B", 2, 0.5}}, Planner: trustSeer{&seen},
		Trust: recordingTrust{&inputs, map[string]float64{"A": 0.5, "B": 0.25}}}, jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || len(res.Records) != 3 {
		t.Fatalf("failed %d, %d records", res.Failed, len(res.Records))
	}
	if len(inputs) == 0 {
		t.Fatal("the trust policy was never asked")
	}
	last := inputs[len(inputs)-1]
	if o := last.Outcomes[policy.TrustKey{To: "A"}]; o.Completed != 1 || o.Failed != 1 {
		t.Fatalf("outcomes at A: %+v, want 1 completed and 1 failed (no half-life: no decay)", o)
	}
	if len(last.Sites) != 2 || last.Sites[1].Power != 4 {
		t.Fatalf("sites as trust sees them: %+v (B: 2 nodes / h 0.5 = power 4)", last.Sites)
	}
	if first, end := seen[0], seen[len(seen)-1]; first[0] != 0 || end[0] != 0.5 || end[1] != 0.25 {
		t.Fatalf("trust seen: first pass %v, last %v", first, end)
	}
}

// Without a trust policy the sites' trust stays unset, on both drivers.
func TestReplayWithoutTrustLeavesItUnset(t *testing.T) {
	jobs := []Job{{ID: "1", Width: 1, Estimate: time.Minute, Runtime: time.Hour, Origin: -1},
		{ID: "2", Submit: time.Hour, Width: 1, Estimate: time.Minute, Runtime: time.Minute, Origin: -1}}
	for _, viaBroker := range []bool{false, true} {
		var seen [][]float64
		if _, err := Run(context.Background(), Setup{Sites: []Site{{"A", 2, 1}}, Planner: trustSeer{&seen}, Broker: viaBroker}, jobs, nil); err != nil {
			t.Fatal(err)
		}
		for _, tr := range seen {
			if tr[0] != 0 {
				t.Fatalf("broker %v: trust %v without a trust policy", viaBroker, tr)
			}
		}
	}
}

// Decay ages the counts in virtual time: a failure a day old with a
// one-hour half-life weighs almost nothing.
func TestReplayTrustDecays(t *testing.T) {
	jobs := []Job{
		{ID: "killed", Width: 1, Estimate: time.Minute, Runtime: time.Hour, Origin: -1},
		{ID: "ok", Submit: 24 * time.Hour, Width: 1, Estimate: time.Hour, Runtime: time.Minute, Origin: -1},
		{ID: "after", Submit: 25 * time.Hour, Width: 1, Estimate: time.Hour, Runtime: time.Minute, Origin: -1},
	}
	var inputs []policy.TrustInput
	var seen [][]float64
	if _, err := Run(context.Background(), Setup{Sites: []Site{{"A", 2, 1}}, Planner: trustSeer{&seen},
		Trust: recordingTrust{&inputs, map[string]float64{"A": 1}}, TrustHalfLife: time.Hour}, jobs, nil); err != nil {
		t.Fatal(err)
	}
	o := inputs[len(inputs)-1].Outcomes[policy.TrustKey{To: "A"}]
	if !(o.Completed > 0.4 && o.Completed < 1) || !(o.Failed > 0 && o.Failed < 1e-6) {
		t.Fatalf("outcomes %+v: want the completion of an hour ago at about half, the day-old failure at almost nothing", o)
	}
}
