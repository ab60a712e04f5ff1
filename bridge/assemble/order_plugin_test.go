package assemble

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/fairshare"
)

// TestOrderPluginOrdersAsInProcess: a broker whose broker.order is
// plugin:builtin:fairshare (gridsub re-executed as `gridsub plugin serve
// order fairshare`) starts a queue's jobs in exactly the order the
// in-process fairshare does, on a site that runs one job at a time, with
// the users' use accounted in the store before the broker started; fcfs
// starts them in another order, and the first started is the one fair
// share puts first.
func TestOrderPluginOrdersAsInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds gridsub")
	}
	bin := filepath.Join(t.TempDir(), "gridsub")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/gridsub/gridsub/cmd/gridsub").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	old := selfExecutable
	selfExecutable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { selfExecutable = old })

	ctx := context.Background()
	users := []string{"u1", "u2", "u3", "u4"}
	past := map[string]float64{"u1": 40000, "u2": 20000, "u3": 5000} // u4: none
	run := func(order string) []string {
		t.Helper()
		st := bridge.NewMemStore()
		for u, ns := range past {
			if err := st.PutCharged(ctx, &bridge.Job{ID: "old-" + u, State: bridge.Completed, Submit: epoch.Add(-time.Hour)},
				bridge.Charge{User: u, NodeSeconds: ns, At: epoch, HalfLife: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		spec := simSpec(st, epoch)
		spec.Sites = spec.Sites[:1] // one 4-node site: one job at a time
		spec.Policies.Order, spec.FairShareHalfLife = order, time.Hour
		e, err := Build(ctx, spec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if _, err := e.Broker.Recover(ctx, epoch); err != nil {
			t.Fatal(err)
		}
		if got := e.Broker.PolicyNames()[policy.KindOrder]; got != "fairshare" && order != "fcfs" {
			t.Fatalf("the broker's order is %q", got)
		}
		if order == "plugin:builtin:fairshare" {
			ls := e.PolicyPlugins()
			if len(ls) != 1 || ls[0].Kind != plugins.KindOrder || ls[0].Mode != plugins.ModeIsolated || ls[0].Pid <= 0 {
				t.Fatalf("listings %+v", ls)
			}
		}
		owner := map[string]string{}
		for i := range 8 {
			u := users[i%len(users)]
			j, err := e.Broker.Submit(ctx, bridge.Request{Name: fmt.Sprintf("%s-%d", u, i), Command: []string{"true"}, Nodes: 4,
				Estimate: 10 * time.Minute, Owner: u}, epoch.Add(time.Duration(i)*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			owner[j.ID] = j.Req.Name
		}
		for at := epoch.Add(10 * time.Second); at.Before(epoch.Add(3 * time.Hour)); at = at.Add(30 * time.Second) {
			cycle(t, e, at)
		}
		var js []*bridge.Job
		for id := range owner {
			j, err := e.Broker.Job(id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != bridge.Completed || j.Start.IsZero() {
				t.Fatalf("%s (%s): %s, started %v", id, owner[id], j.State, j.Start)
			}
			js = append(js, j)
		}
		slices.SortFunc(js, func(a, b *bridge.Job) int { return a.Start.Compare(b.Start) })
		var seq []string
		for i, j := range js {
			if i > 0 && !j.Start.After(js[i-1].Start) {
				t.Fatalf("%s and %s started together: the site should run one at a time", js[i-1].Req.Name, j.Req.Name)
			}
			seq = append(seq, j.Req.Name)
		}
		return seq
	}
	local := run("fairshare")
	remote := run("plugin:builtin:fairshare")
	fcfs := run("fcfs")
	t.Logf("fairshare %v\nplugin    %v\nfcfs      %v", local, remote, fcfs)
	if !slices.Equal(local, remote) {
		t.Errorf("the plugin started the jobs in the order %v, in process %v", remote, local)
	}
	if slices.Equal(local, fcfs) {
		t.Errorf("fair share and fcfs started the jobs in the same order %v: the test shows nothing", local)
	}
	// The first: what fair share puts first given the accounted use alone.
	in := &policy.OrderInput{Now: epoch.Add(10 * time.Second), HalfLife: time.Hour}
	for i := range 8 {
		u := users[i%len(users)]
		in.Queue = append(in.Queue, policy.QueuedJob{ID: fmt.Sprintf("%s-%d", u, i), User: u})
	}
	for u, ns := range past {
		in.Accounted = append(in.Accounted, policy.AccountedUse{User: u, NodeSeconds: ns, At: epoch})
	}
	p, _ := fairshare.FairShare{}.Order(in)
	if first := in.Queue[p[0]].ID; local[0] != first {
		t.Errorf("started first %s, fair share puts %s first", local[0], first)
	}
}
