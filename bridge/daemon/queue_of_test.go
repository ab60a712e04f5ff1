package daemon

import (
	"slices"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// TestQueueOf: the rows of one job (itself and its elements, those
// submitted since the rows were made included) are the ones the whole
// queue has for it, found without listing it; a job whose id is a prefix
// of another's does not take the other's rows.
func TestQueueOf(t *testing.T) {
	row := func(id, parent string) api.QueueRow {
		return api.QueueRow{ID: id, Parent: parent, State: bridge.Queued}
	}
	q := &queueCache{rows: []api.QueueRow{
		row("g-000041", ""), row("g-000042", ""), row("g-000042_1", "g-000042"), row("g-000042_10", "g-000042"),
		row("g-000042_2", "g-000042"), row("g-0000420", ""), row("g-000043", ""),
	}}
	slices.SortFunc(q.rows, func(a, b api.QueueRow) int { return strings.Compare(a.ID, b.ID) }) // as Broker.Jobs gives them
	q.extra = []api.QueueRow{row("g-000042_11", "g-000042"), row("g-000042_2", "g-000042"), row("g-000044", "")}
	for _, id := range []string{"g-000042", "g-000041", "g-0000420", "g-000044", "g-000042_10", "g-000045", "g-00004", ""} {
		var want []api.QueueRow
		for _, r := range q.get(nil) {
			if r.ID == id || r.Parent == id {
				want = append(want, r)
			}
		}
		got := q.of(nil, id)
		if !slices.EqualFunc(got, want, func(a, b api.QueueRow) bool { return a.ID == b.ID }) {
			t.Errorf("of(%q) = %v, want %v", id, ids(got), ids(want))
		}
	}
	if got := ids(q.of(nil, "g-000042")); !slices.Equal(got, []string{"g-000042", "g-000042_1", "g-000042_10", "g-000042_2", "g-000042_11"}) {
		t.Errorf("of(g-000042) = %v", got)
	}
}

func ids(rs []api.QueueRow) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}
