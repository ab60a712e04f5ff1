package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// Queuer is optionally implemented by a Broker that can list its
// unfinished jobs from memory, for GET /v1/queue: what squeue shows by
// default, answered without reading the store.
type Queuer interface {
	Queue(ctx context.Context) ([]QueueRow, error)
}

// QueueRow is one unfinished job as GET /v1/queue gives it: what the
// SLURM and PBS front-ends print for a job, no more.
type QueueRow struct {
	ID        string
	Parent    string // "" for none
	Index     int
	Name      string
	State     bridge.JobState
	Nodes     int
	Cores     int // per node; 0 = the site's default
	Estimate  time.Duration
	Submit    time.Time
	Start     time.Time // zero until it runs
	Predicted bool      // the planner has a placement for it
	Sites     []string  // where its components are
	Partition string    // asked for ("" = the sites' own)
	Account   string
	Owner     string // the job's Request.Owner ("" = the daemon's user); not sent on the wire
}

func (s *Server) rowOwner(r QueueRow) string {
	if r.Owner == "" {
		return s.opts.Owner
	}
	return r.Owner
}

// QueueRowOf is a job's row.
func QueueRowOf(j *bridge.Job) QueueRow {
	r := QueueRow{ID: j.ID, Parent: j.Parent, Index: j.Index, Name: j.Req.Name, State: j.State, Nodes: j.Req.Nodes,
		Cores: j.Req.CoresPerNode, Estimate: j.Req.Estimate, Submit: j.Submit, Start: j.Start, Predicted: j.Predicted.Parts != nil, Owner: j.Req.Owner}
	for _, c := range j.Comps {
		if c.Site != "" && (len(r.Sites) == 0 || r.Sites[len(r.Sites)-1] != c.Site) {
			r.Sites = append(r.Sites, c.Site)
		}
	}
	for _, o := range j.Req.SiteOptions {
		if o.Partition != "" {
			r.Partition = o.Partition
		}
		if o.Account != "" {
			r.Account = o.Account
		}
	}
	return r
}

// QueueWriter is optionally implemented by a Queuer that keeps its rows
// encoded (AppendQueueRow): GET /v1/queue then copies bytes instead of
// formatting every row for every request. WriteQueue writes the rows,
// without the header, as Queue would give them.
type QueueWriter interface {
	WriteQueue(ctx context.Context, w io.Writer) error
}

// QueueOfer is optionally implemented by a Queuer that finds one job's
// rows without listing the queue: GET /v1/queue?id= then asks it.
// QueueOf gives the rows Queue would give whose ID or Parent is id.
type QueueOfer interface {
	QueueOf(ctx context.Context, id string) ([]QueueRow, error)
}

// queueHeader names the columns of GET /v1/queue's answer.
const queueHeader = "id\tparent\tindex\tname\tstate\tnodes\tcores\testimate_s\tsubmit_unix\tstart_unix\tpredicted\tsites\tpartition\taccount"

// queue answers GET /v1/queue: tab-separated values, one unfinished job a
// line after a header, in submission order. Thousands of jobs cost a few
// milliseconds to write and to read, where the full JSON jobs of
// GET /v1/jobs cost far more. ?id=ID keeps the job ID and its elements
// only: a workflow engine's poll of one job, answered without waiting for
// the broker (GET /v1/jobs/{id} waits while a cycle plans).
func (s *Server) queue(w http.ResponseWriter, r *http.Request) {
	q, ok := s.b.(Queuer)
	if !ok {
		s.fail(w, r, http.StatusNotFound, CodeNotFound, "this server lists no queue; use GET /v1/jobs?state=...")
		return
	}
	id := r.URL.Query().Get("id")
	p := caller(r)
	if qw, ok := q.(QueueWriter); ok && id == "" && p.Admin {
		w.Header().Set("Content-Type", "text/tab-separated-values; charset=utf-8")
		io.WriteString(w, queueHeader+"\n")
		if err := qw.WriteQueue(r.Context(), w); err != nil {
			s.log.Warn("GET /v1/queue", "err", err)
		}
		return
	}
	var rows []QueueRow
	var err error
	qo, searched := q.(QueueOfer)
	if id != "" && searched {
		rows, err = qo.QueueOf(r.Context(), id)
	} else {
		rows, err = q.Queue(r.Context())
	}
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	if (id != "" && !searched) || !p.Admin {
		var of []QueueRow // not in place: the rows are the Queuer's
		for _, row := range rows {
			if (id == "" || row.ID == id || row.Parent == id) && (p.Admin || s.rowOwner(row) == p.User) {
				of = append(of, row)
			}
		}
		rows = of
	}
	w.Header().Set("Content-Type", "text/tab-separated-values; charset=utf-8")
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(queueHeader + "\n")
	var line []byte
	for _, row := range rows {
		line = AppendQueueRow(line[:0], row)
		bw.Write(line)
	}
	bw.Flush()
}

var queueClean = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")

// AppendQueueRow appends row's line of GET /v1/queue's answer to b.
func AppendQueueRow(b []byte, row QueueRow) []byte {
	unix := func(b []byte, t time.Time) []byte {
		if t.IsZero() {
			return append(b, '0')
		}
		return strconv.AppendInt(b, t.Unix(), 10)
	}
	b = append(b, row.ID...)
	b = append(append(b, '\t'), row.Parent...)
	b = strconv.AppendInt(append(b, '\t'), int64(row.Index), 10)
	b = append(append(b, '\t'), queueClean.Replace(row.Name)...)
	b = append(append(b, '\t'), row.State...)
	b = strconv.AppendInt(append(b, '\t'), int64(row.Nodes), 10)
	b = strconv.AppendInt(append(b, '\t'), int64(row.Cores), 10)
	b = strconv.AppendInt(append(b, '\t'), int64(row.Estimate/time.Second), 10)
	b = unix(append(b, '\t'), row.Submit)
	b = unix(append(b, '\t'), row.Start)
	b = strconv.AppendBool(append(b, '\t'), row.Predicted)
	b = append(append(b, '\t'), queueClean.Replace(strings.Join(row.Sites, ","))...)
	b = append(append(b, '\t'), queueClean.Replace(row.Partition)...)
	b = append(append(b, '\t'), queueClean.Replace(row.Account)...)
	return append(b, '\n')
}

// Queue lists the daemon's unfinished jobs (GET /v1/queue).
func (c *Client) Queue(ctx context.Context) ([]QueueRow, error) {
	return collectQueue(ctx, c, "/v1/queue")
}

// QueueOf gives the rows of job id and its elements as GET /v1/queue
// has them: none when the job has ended or is unknown (ask Job then). It
// does not wait for a cycle in progress, as Job does.
func (c *Client) QueueOf(ctx context.Context, id string) ([]QueueRow, error) {
	return collectQueue(ctx, c, "/v1/queue?id="+url.QueryEscape(id))
}

// QueueEach calls fn with each of the daemon's unfinished jobs (GET
// /v1/queue) as it reads them, in the queue's order, and stops at fn's
// first error. The row (its Sites included) is fn's only until fn
// returns: a client that prints thousands of rows keeps none of them.
func (c *Client) QueueEach(ctx context.Context, fn func(*QueueRow) error) error {
	return c.queue(ctx, "/v1/queue", fn)
}

func collectQueue(ctx context.Context, c *Client, path string) ([]QueueRow, error) {
	var rows []QueueRow
	err := c.queue(ctx, path, func(r *QueueRow) error {
		row := *r
		row.Sites = slices.Clone(r.Sites)
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (c *Client) queue(ctx context.Context, path string, fn func(*QueueRow) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("api: %w on %s: %w", ErrNoDaemon, c.where, err)
		}
		return fmt.Errorf("api: GET /v1/queue: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &eb) != nil || eb.Code == "" {
			eb = ErrorBody{Error: strings.TrimSpace(string(b)), Code: CodeInternal}
		}
		return &Error{Status: resp.StatusCode, Code: eb.Code, Msg: eb.Error}
	}
	lr := &io.LimitedReader{R: resp.Body, N: c.maxResponse() + 1}
	err = scanQueue(lr, fn)
	if lr.N <= 0 {
		return fmt.Errorf("api: GET /v1/queue: the answer is larger than %d bytes (MaxResponse)", c.maxResponse())
	}
	return err
}

// scanQueue reads GET /v1/queue's answer and calls fn with each row; the
// row and its Sites are reused for the next one.
func scanQueue(r io.Reader, fn func(*QueueRow) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() || sc.Text() != queueHeader {
		return fmt.Errorf("api: GET /v1/queue: the answer does not start with its header")
	}
	var row QueueRow
	var f [14]string
	var sites []string
	for sc.Scan() {
		line := string(sc.Bytes()) // one string a line; the fields are parts of it
		n := 0
		for n < len(f)-1 {
			i := strings.IndexByte(line, '\t')
			if i < 0 {
				break
			}
			f[n], line = line[:i], line[i+1:]
			n++
		}
		f[n] = line
		if n != len(f)-1 || strings.IndexByte(line, '\t') >= 0 {
			return fmt.Errorf("api: GET /v1/queue: a line with %d fields, want 14", n+1+strings.Count(line, "\t"))
		}
		var v [6]int64
		for i, k := range []int{2, 5, 6, 7, 8, 9} {
			x, err := strconv.ParseInt(f[k], 10, 64)
			if err != nil {
				return fmt.Errorf("api: GET /v1/queue: field %d: %w", k, err)
			}
			v[i] = x
		}
		row = QueueRow{ID: f[0], Parent: f[1], Name: f[3], State: bridge.JobState(f[4]),
			Index: int(v[0]), Nodes: int(v[1]), Cores: int(v[2]), Estimate: time.Duration(v[3]) * time.Second,
			Predicted: f[10] == "true", Partition: f[12], Account: f[13]}
		if v[4] > 0 {
			row.Submit = time.Unix(v[4], 0)
		}
		if v[5] > 0 {
			row.Start = time.Unix(v[5], 0)
		}
		sites = sites[:0]
		for s := f[11]; s != ""; {
			x, rest, _ := strings.Cut(s, ",")
			sites, s = append(sites, x), rest
		}
		if len(sites) > 0 {
			row.Sites = sites
		}
		if err := fn(&row); err != nil {
			return err
		}
	}
	return sc.Err()
}
