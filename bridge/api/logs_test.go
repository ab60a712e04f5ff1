package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/store"
)

// logBroker serves a fixed text as every job's stdout, and resolves
// shortened ids from its SQLite store.
type logBroker struct {
	*storeBroker
	text string
}

func (b logBroker) ReadLog(_ context.Context, id string, part int, stream string, offset int64, max int) (bridge.LogChunk, error) {
	if stream != "stdout" {
		return bridge.LogChunk{}, fmt.Errorf("%w: stream %q", bridge.ErrBadRequest, stream)
	}
	end := min(int64(len(b.text)), offset+int64(max))
	return bridge.LogChunk{ID: id, Stream: stream, Part: part, Offset: offset, Size: int64(len(b.text)), Data: []byte(b.text[min(offset, end):end])}, nil
}

func (b logBroker) MatchIDs(ctx context.Context, q string, limit int) ([]string, error) {
	return b.st.(*store.SQLite).MatchIDs(ctx, q, limit)
}

// GET /v1/jobs/{id}/logs reads by offset and bound, takes a shortened id
// (resolved once, for every route), and refuses what it cannot serve.
func TestLogsRouteAndShortIDs(t *testing.T) {
	b := logBroker{newSQLiteBroker(t), "line one\nline two\n"}
	c, _ := serveUnix(t, b)
	ctx := context.Background()
	var ids []string
	for range 2 {
		j, err := c.Submit(ctx, req("x", 1))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	ch, err := c.Logs(ctx, "000002", "stdout", 0, 5, 3)
	if err != nil || ch.ID != ids[1] || string(ch.Data) != "one" || ch.Size != 18 || ch.Offset != 5 {
		t.Fatalf("logs of 000002 from 5, 3 bytes: %+v %v", ch, err)
	}
	if j, err := c.Job(ctx, "1"); err != nil || j.ID != ids[0] {
		t.Fatalf("GET by suffix: %+v %v", j, err)
	}
	if evs, err := c.Events(ctx, "000001"); err != nil || len(evs) == 0 {
		t.Fatalf("events by suffix: %v %v", evs, err)
	}
	_, err = c.Job(ctx, "g00000")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 400 || !errors.Is(err, bridge.ErrBadRequest) || !strings.Contains(err.Error(), "ambiguous: matches "+ids[0]+", "+ids[1]) {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	if _, err := c.Cancel(ctx, "g99"); !errors.Is(err, bridge.ErrNotFound) || !strings.Contains(err.Error(), `no job matches "g99"`) {
		t.Fatalf("cancel of no match: %v", err)
	}
	if j, err := c.Cancel(ctx, "2"); err != nil || j.ID != ids[1] || j.State != bridge.Cancelled {
		t.Fatalf("cancel by suffix: %+v %v", j, err)
	}
	for _, bad := range []func() error{
		func() error { _, err := c.Logs(ctx, ids[0], "stdin", 0, 0, 0); return err },
		func() error { _, err := c.Logs(ctx, ids[0], "stdout", -1, 0, 0); return err },
	} {
		if err := bad(); !errors.Is(err, bridge.ErrBadRequest) {
			t.Errorf("bad request answered %v", err)
		}
	}
	if h, err := c.Health(ctx); err != nil || h.Simulated {
		t.Errorf("health of a wall-clock server: %+v %v", h, err)
	}
}
