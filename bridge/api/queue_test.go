package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// queueBroker is a store broker that also lists a queue.
type queueBroker struct {
	api.Broker
	rows []api.QueueRow
}

func (q queueBroker) Queue(context.Context) ([]api.QueueRow, error) { return q.rows, nil }

// TestQueueRoundTrip: GET /v1/queue's rows come back as they were, a
// name with a tab included (made a space); a broker without a queue
// answers 404.
func TestQueueRoundTrip(t *testing.T) {
	ctx := context.Background()
	rows := []api.QueueRow{
		{ID: "g000001", Name: "a", State: bridge.Running, Nodes: 2, Cores: 4, Estimate: time.Hour, Submit: t0, Start: t0.Add(time.Minute),
			Sites: []string{"Beijing", "Shanghai"}, Partition: "batch", Account: "acct"},
		{ID: "g000002_3", Parent: "g000002", Index: 3, Name: "b\tc", State: bridge.Queued, Nodes: 1, Estimate: 90 * time.Second, Submit: t0, Predicted: true},
	}
	c, _ := serveUnix(t, queueBroker{newSQLiteBroker(t), rows})
	got, err := c.Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := rows
	want[1].Name = "b c"
	if len(got) != 2 {
		t.Fatalf("%d rows", len(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Parent != w.Parent || g.Index != w.Index || g.Name != w.Name || g.State != w.State || g.Nodes != w.Nodes ||
			g.Cores != w.Cores || g.Estimate != w.Estimate || !g.Submit.Equal(w.Submit) || !g.Start.Equal(w.Start) || g.Predicted != w.Predicted ||
			len(g.Sites) != len(w.Sites) || g.Partition != w.Partition || g.Account != w.Account {
			t.Errorf("row %d: got %+v, want %+v", i, g, w)
		}
	}
	c2, _ := serveUnix(t, newSQLiteBroker(t))
	if _, err := c2.Queue(ctx); !errors.Is(err, bridge.ErrNotFound) {
		t.Errorf("a broker without a queue: %v", err)
	}
}

// TestQueueOf: GET /v1/queue?id= keeps the job and its elements, and
// nothing for a job the queue does not have.
func TestQueueOf(t *testing.T) {
	ctx := context.Background()
	rows := []api.QueueRow{
		{ID: "g000001", Name: "a", State: bridge.Running, Nodes: 1, Submit: t0},
		{ID: "g000002", Name: "arr", State: bridge.Queued, Nodes: 1, Submit: t0},
		{ID: "g000002_3", Parent: "g000002", Index: 3, Name: "arr", State: bridge.Queued, Nodes: 1, Submit: t0},
		{ID: "g000020", Name: "c", State: bridge.Queued, Nodes: 1, Submit: t0},
	}
	c, _ := serveUnix(t, queueBroker{newSQLiteBroker(t), rows})
	for _, tc := range []struct {
		id   string
		want []string
	}{
		{"g000001", []string{"g000001"}},
		{"g000002", []string{"g000002", "g000002_3"}},
		{"g000002_3", []string{"g000002_3"}},
		{"g00000", nil},
		{"g000099", nil},
		{"a&id=g000001", nil},
	} {
		got, err := c.QueueOf(ctx, tc.id)
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("QueueOf(%q) = %v, want %v", tc.id, ids, tc.want)
		}
	}
}

// writerBroker keeps its rows encoded (api.QueueWriter).
type writerBroker struct{ queueBroker }

func (q writerBroker) WriteQueue(_ context.Context, w io.Writer) error {
	var b []byte
	for _, r := range q.rows {
		b = api.AppendQueueRow(b, r)
	}
	_, err := w.Write(b)
	return err
}

// TestQueueEncodings: a Queuer's rows and a QueueWriter's bytes give the
// same answer, byte for byte, and AppendQueueRow writes the line the
// format says (tabs and newlines in text become spaces, a zero time 0).
func TestQueueEncodings(t *testing.T) {
	rows := []api.QueueRow{
		{ID: "g000001", Name: "a", State: bridge.Running, Nodes: 2, Cores: 4, Estimate: time.Hour, Submit: t0, Start: t0.Add(time.Minute),
			Sites: []string{"Beijing", "Shanghai"}, Partition: "batch", Account: "acct"},
		{ID: "g000002_3", Parent: "g000002", Index: 3, Name: "b\tc\nd\re", State: bridge.Queued, Nodes: 1, Estimate: 90 * time.Second, Submit: t0, Predicted: true,
			Partition: "p\tq", Account: "x\ny"},
	}
	want := fmt.Sprintf("g000001\t\t0\ta\trunning\t2\t4\t3600\t%d\t%d\tfalse\tBeijing,Shanghai\tbatch\tacct\n", t0.Unix(), t0.Add(time.Minute).Unix())
	want += fmt.Sprintf("g000002_3\tg000002\t3\tb c d e\tqueued\t1\t0\t90\t%d\t0\ttrue\t\tp q\tx y\n", t0.Unix())
	var got []byte
	for _, r := range rows {
		got = api.AppendQueueRow(got, r)
	}
	if string(got) != want {
		t.Errorf("AppendQueueRow:\n%q\nwant\n%q", got, want)
	}
	get := func(b api.Broker) string {
		_, sock := serveUnix(t, b)
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
		resp, err := hc.Get("http://gridsub/v1/queue")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	a, b := get(queueBroker{newSQLiteBroker(t), rows}), get(writerBroker{queueBroker{newSQLiteBroker(t), rows}})
	if a != b || !strings.HasSuffix(a, "\n"+want) {
		t.Errorf("GET /v1/queue from rows:\n%q\nfrom a QueueWriter:\n%q", a, b)
	}
}
