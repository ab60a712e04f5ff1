package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// partSite is a fake site that lists its partitions, or refuses its own
// configuration as a SLURM or PBS site whose configured partition or
// queue is missing does (backends.MissingName in ErrRejected).
type partSite struct {
	*fakeSite
	mu    sync.Mutex
	parts []string
	accts []string // the accounts it lists (nil: it cannot say)
	bad   string   // the missing configured partition; "" = none
}

func (p *partSite) Info(ctx context.Context) (*backends.SiteInfo, error) {
	p.mu.Lock()
	parts, bad := p.parts, p.bad
	p.mu.Unlock()
	if bad != "" {
		return nil, fmt.Errorf("%w: %s", backends.ErrRejected, backends.MissingName(p.name, "partition", "partition", bad, parts))
	}
	in, err := p.fakeSite.Info(ctx)
	if in != nil {
		in.Kind, in.Partitions, in.Accounts = "slurm", parts, p.accts
	}
	return in, err
}

// TestMisconfiguredSiteIsNamed: a site whose configured partition is
// missing is not called "down": a job only it may run waits with the
// site's own words as its reason (site, field, what it has), the dry run
// excludes it with them, and once the configuration is fixed the job runs.
func TestMisconfiguredSiteIsNamed(t *testing.T) {
	ctx := context.Background()
	a := &partSite{fakeSite: newFake("a", 4), parts: []string{"debug", "batch"}, bad: "nope"}
	b := greedyBroker(t, NewMemStore(), true, a, newFake("b", 4))
	r := req(1)
	r.Sites = []string{"a"}
	j, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	mustCycle(t, b, t0)
	got, _ := b.Job(j.ID)
	want := `site a has no partition "nope" (sites.a.partition in the configuration); it has: batch, debug`
	if got.State != Queued || !strings.Contains(got.Reason, want) {
		t.Fatalf("pinned to a misconfigured site: %s, reason %q; want it queued with %q", got.State, got.Reason, want)
	}
	e, err := b.Explain(ctx, r, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range e.Excluded {
		found = found || (x.Site == "a" && strings.HasPrefix(x.Why, "misconfigured: ") && strings.Contains(x.Why, want))
	}
	if !found {
		t.Fatalf("dry run: excluded %+v; want site a misconfigured: %q", e.Excluded, want)
	}
	a.mu.Lock()
	a.bad = ""
	a.mu.Unlock()
	mustCycle(t, b, t0.Add(2*time.Second))
	if got, _ := b.Job(j.ID); got.State != Dispatched || got.Sites() != "a:1" {
		t.Fatalf("configuration fixed: %s on %s", got.State, got.Sites())
	}
}

// TestJobPartitionNamed: a job whose SiteOptions name a partition the site
// does not have is refused at submission and by the dry run with a
// FieldError on that field naming the site and its partitions; a site not
// known at submission is checked when the planner picks it, and the job is
// rejected with the same words when no allowed site is left, or goes to
// another allowed site.
func TestJobPartitionNamed(t *testing.T) {
	ctx := context.Background()
	a := &partSite{fakeSite: newFake("a", 4), parts: []string{"debug", "batch"}}
	c := newFake("c", 4)
	b := greedyBroker(t, NewMemStore(), true, a, c)
	r := req(1)
	r.SiteOptions = map[string]SiteOptions{"a": {Partition: "gpu"}}
	want := `site a has no partition "gpu"; it has: batch, debug`
	for name, call := range map[string]func() error{
		"submit":  func() error { _, err := b.Submit(ctx, r, t0); return err },
		"dry run": func() error { _, err := b.Explain(ctx, r, t0); return err },
	} {
		err := call()
		var fe *FieldError
		if !errors.Is(err, ErrBadRequest) || !errors.As(err, &fe) || fe.Field != `SiteOptions["a"].Partition` || fe.Msg != want {
			t.Fatalf("%s: %v; want a FieldError on SiteOptions[\"a\"].Partition: %s", name, err, want)
		}
	}
	r.SiteOptions["a"] = SiteOptions{Partition: "batch"}
	if _, err := b.Submit(ctx, r, t0); err != nil {
		t.Fatalf("a partition the site has: %v", err)
	}

	// The site's partitions were not known at submission (it did not
	// answer): the dispatch stage checks them once it does.
	late := &partSite{fakeSite: newFake("late", 4), parts: []string{"debug"}, bad: "x"}
	other := newFake("other", 4)
	b2 := greedyBroker(t, NewMemStore(), true, late, other)
	late.mu.Lock()
	late.bad = ""
	late.mu.Unlock()
	r2 := req(1)
	r2.Sites = []string{"late"}
	r2.SiteOptions = map[string]SiteOptions{"late": {Partition: "gpu"}}
	// Submitted before the broker has seen the site: not judged yet.
	b2.in.opts.CheckFeasible = false
	j2, err := b2.Submit(ctx, r2, t0)
	if err != nil {
		t.Fatal(err)
	}
	r3 := r2
	r3.Sites = []string{"late", "other"}
	j3, err := b2.Submit(ctx, r3, t0)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		mustCycle(t, b2, t0.Add(time.Duration(k+1)*time.Second))
	}
	got, _ := b2.Job(j2.ID)
	want = `SiteOptions["late"].Partition: site late has no partition "gpu"; it has: debug`
	if got.State != Rejected || !strings.Contains(got.Reason, want) {
		t.Fatalf("pinned to a site without its partition: %s, reason %q; want rejected with %q", got.State, got.Reason, want)
	}
	if len(late.jobs) != 0 {
		t.Fatalf("the site without the partition got %d submissions", len(late.jobs))
	}
	got, _ = b2.Job(j3.ID)
	if got.State != Dispatched || got.Sites() != "other:1" || !hasEvent(got, "refused", want) {
		t.Fatalf("another site allowed: %s on %s, events %+v", got.State, got.Sites(), got.Events)
	}
}

// TestRefusedAccountNamed: a site that refuses a job's account (sbatch's
// words with enforced associations) is recorded with the field and the
// account named, ahead of the site's own message, and the job's reason
// carries it when no site is left.
func TestRefusedAccountNamed(t *testing.T) {
	ctx := context.Background()
	a := newFake("a", 4)
	a.submitErr = fmt.Errorf("%w: sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified", backends.ErrRejected)
	b := greedyBroker(t, NewMemStore(), false, a)
	r := req(1)
	r.SiteOptions = map[string]SiteOptions{"a": {Account: "nosuch"}}
	j, err := b.Submit(ctx, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		mustCycle(t, b, t0.Add(time.Duration(k)*time.Second))
	}
	got, _ := b.Job(j.ID)
	want := `SiteOptions["a"].Account "nosuch": site a does not take it: `
	if got.State != Failed || !strings.Contains(got.Reason, want) || !strings.Contains(got.Reason, "Invalid account") {
		t.Fatalf("%s %q; want failed naming %q and the site's words", got.State, got.Reason, want)
	}
}

// TestJobAccountNamed: a job's account that a site's accounting does not
// list for the login user is refused at submission and by the dry run,
// naming the site, the field and the accounts it has (CheckSiteOptions,
// `gridsub validate`'s check, says the same); accepted before the broker
// had seen the site, the job is rejected at dispatch with the same words
// and nothing reaches the site. A site that lists no accounts is not
// judged on them.
func TestJobAccountNamed(t *testing.T) {
	ctx := context.Background()
	a := &partSite{fakeSite: newFake("a", 4), parts: []string{"batch"}, accts: []string{"proj2", "proj1"}}
	blind := &partSite{fakeSite: newFake("blind", 4), parts: []string{"batch"}}
	b := greedyBroker(t, NewMemStore(), true, a, blind)
	r := req(1)
	r.SiteOptions = map[string]SiteOptions{"a": {Account: "nosuch"}, "blind": {Account: "nosuch"}}
	want := `site a has no account "nosuch" for its login user; it has: proj1, proj2`
	for name, call := range map[string]func() error{
		"submit":  func() error { _, err := b.Submit(ctx, r, t0); return err },
		"dry run": func() error { _, err := b.Explain(ctx, r, t0); return err },
		"validate": func() error {
			return CheckSiteOptions(&r, map[string]*backends.SiteInfo{
				"a":     {Kind: "slurm", Partitions: []string{"batch"}, Accounts: []string{"proj1", "proj2"}},
				"blind": {Kind: "slurm", Partitions: []string{"batch"}}})
		},
	} {
		err := call()
		var fe *FieldError
		if !errors.Is(err, ErrBadRequest) || !errors.As(err, &fe) || fe.Field != `SiteOptions["a"].Account` || fe.Msg != want {
			t.Fatalf("%s: %v; want a FieldError on SiteOptions[\"a\"].Account: %s", name, err, want)
		}
		if strings.Contains(err.Error(), "blind") {
			t.Fatalf("%s: the site that lists no accounts was judged: %v", name, err)
		}
	}
	r.SiteOptions["a"] = SiteOptions{Account: "proj2"}
	if _, err := b.Submit(ctx, r, t0); err != nil {
		t.Fatalf("an account the site lists: %v", err)
	}

	late := &partSite{fakeSite: newFake("late", 4), parts: []string{"batch"}, accts: []string{"proj1"}, bad: "x"}
	b2 := greedyBroker(t, NewMemStore(), true, late, newFake("other", 4))
	late.mu.Lock()
	late.bad = ""
	late.mu.Unlock()
	r2 := req(1)
	r2.Sites = []string{"late"}
	r2.SiteOptions = map[string]SiteOptions{"late": {Account: "nosuch"}}
	b2.in.opts.CheckFeasible = false
	j2, err := b2.Submit(ctx, r2, t0)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		mustCycle(t, b2, t0.Add(time.Duration(k+1)*time.Second))
	}
	got, _ := b2.Job(j2.ID)
	want = `SiteOptions["late"].Account: site late has no account "nosuch" for its login user; it has: proj1`
	if got.State != Rejected || !strings.Contains(got.Reason, want) || len(late.jobs) != 0 {
		t.Fatalf("pinned to a site without its account: %s, reason %q, %d submissions; want rejected with %q, none", got.State, got.Reason, len(late.jobs), want)
	}
}
