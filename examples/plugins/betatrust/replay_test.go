package betatrust

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/trust"
	"github.com/gridsub/gridsub/simbackend/replay"
	"github.com/gridsub/gridsub/simbackend/trustsim"
)

// workload is n jobs arriving over a few days, a sixth of them running
// past their estimate (killed at walltime: a failure the trust policy
// counts at the sites they ran on).
func workload(n int) []replay.Job {
	r := rand.New(rand.NewPCG(2026, 11))
	jobs := make([]replay.Job, n)
	at := time.Duration(0)
	for i := range jobs {
		at += time.Duration(r.IntN(240)) * time.Second
		est := time.Duration(60+r.IntN(4*3600)) * time.Second
		run := time.Duration(float64(est) * (0.2 + 0.7*r.Float64()))
		if r.IntN(6) == 0 {
			run = est + time.Duration(1+r.IntN(3600))*time.Second
		}
		jobs[i] = replay.Job{ID: fmt.Sprint(i + 1), Submit: at, Width: 1 + r.IntN(24), Estimate: est, Runtime: run,
			Origin: r.IntN(4) - 1, Size: int64(r.IntN(200 << 20))}
	}
	return jobs
}

// counting counts the Scores and Decay calls a replay makes of its trust
// policy.
type counting struct {
	policy.Trust
	n, decays *int
}

func (c counting) Scores(in *policy.TrustInput) (map[string]float64, error) {
	*c.n++
	return c.Trust.Scores(in)
}

func (c counting) Decay(o policy.Outcomes, elapsed, halfLife time.Duration) policy.Outcomes {
	*c.decays++
	return c.Trust.Decay(o, elapsed, halfLife)
}

// TestReplayThroughPlugin: a trace replay whose sites' trust is learned by
// the beta model (replay.Setup.Trust) and planned by Trust-Min-min gives
// byte-identical records with the model in process and with the model out
// of process (the plugin built from its own main, checksummed); the trust
// it learns changes the placements (the records differ from a replay
// without it), so the plugin's answers are in the loop.
func TestReplayThroughPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the plugin and replays a trace three times")
	}
	bin, sum := buildPlugin(t)
	remote := loadPlugin(t, bin, sum)
	jobs := workload(700)
	setup := replay.Setup{
		Sites: []replay.Site{{Name: "Beijing", Nodes: 96, H: 1}, {Name: "Shanghai", Nodes: 64, H: 0.8}, {Name: "Harbin", Nodes: 48, H: 1.3}},
		Links: [][]policy.Link{
			{{}, {SecPerByte: 1e-7, Latency: 50 * time.Millisecond}, {SecPerByte: 2e-7, Latency: 80 * time.Millisecond}},
			{{SecPerByte: 1e-7, Latency: 50 * time.Millisecond}, {}, {SecPerByte: 1e-7, Latency: 60 * time.Millisecond}},
			{{SecPerByte: 2e-7, Latency: 80 * time.Millisecond}, {SecPerByte: 1e-7, Latency: 60 * time.Millisecond}, {}},
		},
		MultiSite: 1.1, Planner: &trust.Planner{}, TrustHalfLife: 6 * time.Hour,
	}
	var want string
	for _, c := range []struct {
		name string
		tp   policy.Trust
	}{{"in process", New()}, {"plugin", remote}, {"no trust", nil}} {
		calls, decays := 0, 0
		setup.Trust = nil
		if c.tp != nil {
			setup.Trust = counting{c.tp, &calls, &decays}
		}
		t0 := time.Now()
		res, err := replay.Run(context.Background(), setup, jobs, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, err := json.Marshal(res.Records)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-10s %d cycles, %d failed, %d Scores and %d Decay calls, %s", c.name, res.Cycles, res.Failed, calls, decays, time.Since(t0).Round(time.Millisecond))
		switch {
		case want == "":
			want = string(b)
			if res.Failed == 0 || calls == 0 {
				t.Fatalf("in process: %d failed jobs, %d trust computations: nothing to learn", res.Failed, calls)
			}
		case c.tp != nil:
			if string(b) != want {
				t.Fatalf("%s: the records differ from the replay with the model in process", c.name)
			}
		default:
			if string(b) == want {
				t.Errorf("without trust the records are the same: the learned trust never changed a placement")
			}
		}
	}
	if err := remote.(interface{ Err() error }).Err(); err != nil {
		t.Errorf("a Decay call failed in the plugin replay: %v", err)
	}
}

// TestTrustExperimentThroughPlugin: paper 002's experiment (trustsim:
// Trust-Min-min over 20 clusters, a fifth failing every run, trust learned
// between runs with every cluster and area asking as the observer) gives
// the same results with the beta model in process and out of process.
func TestTrustExperimentThroughPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the plugin")
	}
	bin, sum := buildPlugin(t)
	remote := loadPlugin(t, bin, sum)
	c := trustsim.Default()
	c.Runs, c.Tasks = 20, 60
	c.Policy = trustsim.TrustMinMinScore // the variant that asks a policy.Trust
	var out [2]string
	calls, decays := 0, 0
	for i, tp := range []policy.Trust{New(), counting{remote, &calls, &decays}} {
		c.Trust = tp
		res, err := trustsim.Sequence(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	if out[0] != out[1] {
		t.Fatal("the experiment's results differ with the model out of process")
	}
	if calls == 0 {
		t.Fatal("the experiment never asked the plugin")
	}
	t.Logf("%d Scores calls through the plugin", calls)
}
