package slurm

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// TestAccountsInInfo: Info lists the login user's accounts from sacctmgr
// (read once, again after AccountsEvery), fails naming the account when
// the site's configured one is not among them, keeps the last list while
// sacctmgr fails for a reason that may pass (asked again sooner), and
// never asks a site without accounting again.
func TestAccountsInInfo(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var assoc backends.Result
	asked := 0
	run := runnerFunc(func(_ context.Context, argv []string, _ io.Reader) (backends.Result, error) {
		switch cmdName(argv) {
		case "sinfo":
			return fixture(t, "sinfo"), nil
		case "squeue":
			return backends.Result{}, nil
		case "sacctmgr":
			if argv[0] != "timeout" {
				t.Errorf("sacctmgr runs without a bound at the site: %q", argv)
			}
			asked++
			return assoc, nil
		}
		t.Fatalf("unexpected %q", argv)
		return backends.Result{}, nil
	})
	assoc = fixture(t, "sacctmgr_assoc")
	b := New(Config{Name: "siteA", User: "griduser", Now: func() time.Time { return now }}, run, nil)
	ctx := context.Background()
	info := func() (*backends.SiteInfo, error) { t.Helper(); return b.Info(ctx) }
	in, err := info()
	if err != nil || !slices.Equal(in.Accounts, []string{"gridsub"}) || asked != 1 {
		t.Fatalf("Info: %+v %v after %d sacctmgr; want accounts [gridsub] after 1", in, err, asked)
	}
	now = now.Add(time.Minute)
	if in, err = info(); err != nil || !slices.Equal(in.Accounts, []string{"gridsub"}) || asked != 1 {
		t.Fatalf("a minute later: %+v %v, %d sacctmgr; want the same list, not asked again", in, err, asked)
	}
	// slurmdbd down: the last list holds, asked again 2 min later.
	now = now.Add(AccountsEvery)
	assoc = backends.Result{ExitCode: 1, Stderr: []byte("sacctmgr: error: Problem talking to the database: Connection refused\n")}
	if in, err = info(); err != nil || !slices.Equal(in.Accounts, []string{"gridsub"}) || asked != 2 {
		t.Fatalf("slurmdbd down: %+v %v, %d sacctmgr; want the last list kept", in, err, asked)
	}
	now = now.Add(time.Minute)
	if _, _ = info(); asked != 2 {
		t.Fatalf("asked again %d times within the retry wait", asked-2)
	}
	now = now.Add(90 * time.Second)
	assoc = fixture(t, "sacctmgr_assoc")
	if _, _ = info(); asked != 3 {
		t.Fatalf("not asked again after the retry wait (%d)", asked)
	}

	bad := New(Config{Name: "siteA", User: "griduser", Account: "nosuch", Now: func() time.Time { return now }}, run, nil)
	_, err = bad.Info(ctx)
	want := `site siteA has no account "nosuch" (sites.siteA.account in the configuration); it has: gridsub`
	if !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a configured account the site lacks: %v; want ErrRejected saying %s", err, want)
	}

	asked = 0
	assoc = backends.Result{ExitCode: 1, Stderr: []byte("You are not running a supported accounting_storage plugin\nOnly 'accounting_storage/slurmdbd' is supported.\n")}
	none := New(Config{Name: "siteB", User: "griduser", Account: "anything", Now: func() time.Time { return now }}, run, nil)
	for range 2 {
		now = now.Add(AccountsEvery)
		if in, err := none.Info(ctx); err != nil || in.Accounts != nil {
			t.Fatalf("a site without accounting: %+v %v; want no accounts and no judgement", in, err)
		}
	}
	if asked != 1 {
		t.Fatalf("a site without accounting asked %d times, want once", asked)
	}
}
