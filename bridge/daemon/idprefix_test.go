package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/store"
)

// TestIDPrefixIsKeptPerStateDir: a state directory keeps its job id prefix
// across restarts, and two state directories never share one (remote jobs
// are tagged with the job id).
func TestIDPrefixIsKeptPerStateDir(t *testing.T) {
	ctx := context.Background()
	open := func(dir string) *store.SQLite {
		st, err := store.Open(ctx, filepath.Join(dir, DBName), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	d1 := t.TempDir()
	st := open(d1)
	p1, err := idPrefix(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = open(d1)
	again, _ := idPrefix(ctx, st)
	st.Close()
	time.Sleep(time.Microsecond)
	st2 := open(t.TempDir())
	other, _ := idPrefix(ctx, st2)
	st2.Close()
	if !strings.HasPrefix(p1, "g") || !strings.HasSuffix(p1, "-") || again != p1 || other == p1 {
		t.Fatalf("prefix %q, after reopening %q, other state dir %q", p1, again, other)
	}
}
