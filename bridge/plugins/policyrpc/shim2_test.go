package policyrpc

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
	"github.com/gridsub/gridsub/policy"
)

func TestRemapShim(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	s := snapshot(r)
	in := &policy.RemapInput{Now: t0, Snapshot: s, Free: []int{3, 0, 5}, MinGain: time.Minute,
		Waiting: []policy.Waiting{{Job: s.Queue[0], Parts: []policy.Part{{Site: 1, Nodes: 2}}, Estimates: []time.Time{t0.Add(time.Hour)}},
			{Job: s.Queue[1], Parts: []policy.Part{{Site: 0, Nodes: 1}, {Site: 1, Nodes: 1}}, Estimates: []time.Time{{}, t0.Add(2 * time.Hour)}}}}
	want := []policy.Move{{Job: "j0", To: policy.Option{Parts: []policy.Part{{Site: 2, Nodes: 2}}, Start: t0, Runtime: time.Hour, Immediate: true},
		FromStart: t0.Add(time.Hour), Gain: time.Hour}}
	var seen *policy.RemapInput
	var fail error
	raw, _ := Test(t, plugins.KindRemap, mockRemap{moves: func(in *policy.RemapInput) ([]policy.Move, error) {
		seen = in
		if fail != nil {
			return nil, fail
		}
		return want, nil
	}})
	c := raw.(*RemapClient)
	got, err := c.Moves(in)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Moves %v %v, want %v", got, err, want)
	}
	if !reflect.DeepEqual(seen, in) {
		t.Errorf("the plugin saw\n%+v\nnot\n%+v", seen, in)
	}
	fail = errors.ErrUnsupported
	if _, err := c.Moves(in); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("error %v lost its identity", err)
	}
}

func TestTieringShim(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	s := snapshot(r)
	impl := mockTiering{
		tier: func(d *policy.TierDemand, sites []policy.Site) (policy.Tier, string) {
			if d.Asked != "" {
				return d.Asked, "asked"
			}
			return policy.TierLow, sites[0].Name
		},
		copies: func(in *policy.CopyInput) ([]policy.Part, []policy.Part) {
			// The least RC of the sites, then the next.
			best, next := -1, -1
			var rb, rn float64
			for i := range in.Snapshot.Sites {
				rc := in.RC[i]
				switch {
				case best < 0 || rc < rb:
					next, rn, best, rb = best, rb, i, rc
				case next < 0 || rc < rn:
					next, rn = i, rc
				}
			}
			return []policy.Part{{Site: best, Nodes: in.Job.Width}}, []policy.Part{{Site: next, Nodes: in.Job.Width}}
		},
		backup: func(in *policy.BackupInput) policy.Backup {
			return policy.Backup{Due: in.Now.Add(in.Primary.Runtime), Why: "active: " + in.Job.ID}
		},
	}
	raw, server := Test(t, plugins.KindTiering, impl)
	c := raw.(*TieringClient)
	d := &policy.TierDemand{Deadline: t0.Add(time.Hour), Estimate: time.Minute, Sites: []string{}, Submit: t0, Lambda: 0.5}
	if tier, why := c.Tier(d, s.Sites); tier != policy.TierLow || why != "s0" || c.Err() != nil {
		t.Errorf("Tier %q %q (%v)", tier, why, c.Err())
	}
	d.Asked = policy.TierHigh
	if tier, _ := c.Tier(d, s.Sites); tier != policy.TierHigh {
		t.Errorf("Tier %q", tier)
	}
	in := &policy.CopyInput{Snapshot: s, Job: &s.Queue[0], Decision: policy.Decision{Job: "j0", Action: policy.Start,
		Chosen: policy.Option{Parts: []policy.Part{{Site: 0, Nodes: 1}}}}}
	for i := range s.Sites {
		in.RC = append(in.RC, 1/float64(i+1)) // later sites: lower RC
	}
	wf, ws := impl.Copies(in)
	gf, gs := c.Copies(in)
	if !reflect.DeepEqual(gf, wf) || !reflect.DeepEqual(gs, ws) || c.Err() != nil {
		t.Errorf("Copies %v %v, want %v %v (%v)", gf, gs, wf, ws, c.Err())
	}
	bin := &policy.BackupInput{Snapshot: s, Job: &s.Queue[1], Now: t0, Primary: policy.Option{Runtime: time.Hour}, Backup: []policy.Part{{Site: 1, Nodes: 2}}}
	if got, want := c.Backup(bin), impl.backup(bin); !reflect.DeepEqual(got, want) {
		t.Errorf("Backup %+v, want %+v", got, want)
	}
	// A plugin gone: the safe answers, and Err says why.
	server.Stop()
	if tier, _ := c.Tier(d, s.Sites); tier != policy.TierNone || !errors.Is(c.Err(), wire.ErrPluginExited) {
		t.Errorf("Tier on a stopped plugin: %q, %v", tier, c.Err())
	}
	if f, sec := c.Copies(in); !reflect.DeepEqual(f, in.Decision.Chosen.Parts) || sec != nil {
		t.Errorf("Copies on a stopped plugin: %v %v", f, sec)
	}
	if b := c.Backup(bin); !b.Passive {
		t.Errorf("Backup on a stopped plugin: %+v", b)
	}
}

func TestWrongKind(t *testing.T) {
	if err := register(nil, plugins.KindTrust, mockRemap{}, "x"); err == nil {
		t.Error("a remap policy served as trust")
	}
	if err := Serve("nonsense", mockRemap{}, "x"); err == nil {
		t.Error("an unknown kind served")
	}
}
