package bridge

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

// fakeIdentities gives each user in own their own backend at site "A";
// a user in broken has an identity that cannot be used.
type fakeIdentities struct {
	own    map[string]*fakeSite
	broken map[string]bool
}

func (f *fakeIdentities) Backend(_ context.Context, site, owner string) (backends.Backend, error) {
	if f.broken[owner] {
		return nil, fmt.Errorf("the key file of %s at %s is unreadable", owner, site)
	}
	if be, ok := f.own[owner]; ok && site == "A" {
		return be, nil
	}
	return nil, nil
}

func (f *fakeIdentities) Has(site, owner string) bool {
	_, ok := f.own[owner]
	return (ok && site == "A") || f.broken[owner]
}

// TestIdentitiesRouteEveryCallByOwner: a job of a user with an identity
// of their own at a site is submitted, polled and cancelled through that
// identity's backend, every other job through the site's; the daemon's
// own user's jobs too. A user whose identity cannot be used waits,
// nothing of theirs goes out under the site's login, and the site is not
// judged down for it.
func TestIdentitiesRouteEveryCallByOwner(t *testing.T) {
	ctx := context.Background()
	site, alice := newFake("A", 8), newFake("A", 8)
	alice.next = 100 // one batch system behind both logins: one space of job ids
	ids := &fakeIdentities{own: map[string]*fakeSite{"alice": alice}, broken: map[string]bool{"carol": true}}
	b, err := New(Options{Sites: []SiteConfig{{Name: "A", Backend: site}}, Planner: scriptPlanner{firstFit}, Identities: ids, Owner: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(owner string) *Job {
		r := req(1)
		r.Owner = owner
		j, err := b.Submit(ctx, r, t0)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	ja, jb, js, jc := submit("alice"), submit("bob"), submit(""), submit("carol")
	rep, _ := b.Cycle(ctx, t0)
	if len(alice.specs) != 1 || len(site.specs) != 2 {
		t.Fatalf("alice's identity got %d submissions, the site's %d; want 1 and 2 (bob's, the daemon's)", len(alice.specs), len(site.specs))
	}
	for _, sp := range alice.specs {
		if sp.GridID[:len(ja.ID)] != ja.ID {
			t.Fatalf("alice's identity got job %s", sp.GridID)
		}
	}
	if j, _ := b.Job(jc.ID); j.State != Queued || !errors.Is(errors.Join(rep.Errors...), ErrIdentity) {
		t.Fatalf("carol's job is %s (errors %v); want it queued with an ErrIdentity", j.State, rep.Errors)
	}
	alice.set(ja.ID, backends.StateRunning, 0)
	site.set(jb.ID, backends.StateRunning, 0)
	statusA, statusS := alice.statusN, site.statusN
	mustCycle(t, b, t0.Add(1e9))
	if alice.statusN == statusA || site.statusN == statusS {
		t.Fatalf("a cycle asked alice's identity %d and the site %d times for statuses, want both asked", alice.statusN-statusA, site.statusN-statusS)
	}
	for _, id := range []string{ja.ID, jb.ID} {
		if j, _ := b.Job(id); j.State != Running {
			t.Fatalf("job %s is %s, want running", id, j.State)
		}
	}
	for _, id := range []string{ja.ID, js.ID} {
		if err := b.Cancel(ctx, id, t0.Add(2e9)); err != nil {
			t.Fatal(err)
		}
	}
	if len(alice.cancels) != 1 || len(site.cancels) != 1 {
		t.Fatalf("cancels: alice's identity %v, the site %v; want one each", alice.cancels, site.cancels)
	}
	if b.siteTable.downSince != nil && !b.siteTable.downSince[0].IsZero() {
		t.Fatal("the site is judged down for carol's unusable identity")
	}
}
