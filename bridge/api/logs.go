package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
)

// LogSource is optionally implemented by a Broker that can show a job's
// output while it runs (GET /v1/jobs/{id}/logs).
//
// Contract: as bridge.Broker.ReadLog: id is an exact job id (the server
// resolves shortened ones first); at most max bytes (backends.MaxLogRead)
// of the stream from offset; errors wrap bridge.ErrNotFound or
// bridge.ErrBadRequest for a request that cannot be served. Safe for
// concurrent use.
type LogSource interface {
	ReadLog(ctx context.Context, id string, part int, stream string, offset int64, max int) (bridge.LogChunk, error)
}

// logs serves GET /v1/jobs/{id}/logs?stream=stdout|stderr&offset=N&max=N&part=N.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	ls, ok := s.b.(LogSource)
	if !ok {
		s.fail(w, r, http.StatusNotFound, CodeNotFound, "this server cannot show a job's output")
		return
	}
	q := r.URL.Query()
	for k := range q {
		if k != "stream" && k != "offset" && k != "max" && k != "part" {
			s.failErr(w, r, fmt.Errorf("%w: unknown query parameter %q; known: stream, offset, max, part", bridge.ErrBadRequest, k))
			return
		}
	}
	stream := q.Get("stream")
	if stream == "" {
		stream = backends.StreamStdout
	}
	num := func(k string, def int64) (int64, error) {
		v := q.Get(k)
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: %s %q; want an integer >= 0", bridge.ErrBadRequest, k, v)
		}
		return n, nil
	}
	offset, err := num("offset", 0)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	max, err := num("max", backends.MaxLogRead)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	part, err := num("part", 0)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	id, err := s.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	ch, err := ls.ReadLog(r.Context(), id, int(min(part, 1<<20)), stream, offset, backends.LogMax(int(min(max, backends.MaxLogRead))))
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	if ch.Data == nil {
		ch.Data = []byte{}
	}
	writeJSON(w, http.StatusOK, ch)
}

// Logs reads a piece of a job's output (GET /v1/jobs/{id}/logs).
func (c *Client) Logs(ctx context.Context, id, stream string, part int, offset int64, max int) (*bridge.LogChunk, error) {
	v := url.Values{"stream": {stream}, "offset": {strconv.FormatInt(offset, 10)}, "part": {strconv.Itoa(part)}}
	if max > 0 {
		v.Set("max", strconv.Itoa(max))
	}
	var ch bridge.LogChunk
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/logs?"+v.Encode(), nil, &ch); err != nil {
		return nil, err
	}
	return &ch, nil
}
