package plannerrpc

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// mirror is the host's copy of a session's snapshot: the seed, plus every
// Submit, Hold and Release, minus the jobs each plan started or rejected,
// with Now at the last pass. By policy.Session's contract a new session
// seeded with it plans exactly what the old one would have, which is how a
// restarted plugin, or a fallback planner, takes over.
type mirror struct {
	snap policy.Snapshot // Quiet
}

// seed copies s (deeply: the caller may change it afterwards).
func (m *mirror) seed(s *policy.Snapshot) {
	m.snap = policy.Snapshot{Now: s.Now, MultiSite: s.MultiSite, Quiet: true,
		Sites: slices.Clone(s.Sites), Queue: slices.Clone(s.Queue), Uplinks: slices.Clone(s.Uplinks)}
	for i := range m.snap.Sites {
		m.snap.Sites[i].Busy = slices.Clone(m.snap.Sites[i].Busy)
	}
	if s.Links != nil {
		m.snap.Links = make([][]policy.Link, len(s.Links))
		for i := range s.Links {
			m.snap.Links[i] = slices.Clone(s.Links[i])
		}
	}
}

func (m *mirror) submit(j policy.Job) { m.snap.Queue = append(m.snap.Queue, j) }

func (m *mirror) hold(site, nodes int, until time.Time) error {
	if site < 0 || site >= len(m.snap.Sites) {
		return fmt.Errorf("plannerrpc: session: hold at site %d of %d", site, len(m.snap.Sites))
	}
	if nodes < 1 {
		return fmt.Errorf("plannerrpc: session: hold of %d nodes at site %s; a hold is at least one node", nodes, m.snap.Sites[site].Name)
	}
	st := &m.snap.Sites[site]
	st.Busy = append(st.Busy, policy.Hold{Nodes: nodes, Until: until})
	st.Free -= nodes
	return nil
}

func (m *mirror) release(site, nodes int, until time.Time) error {
	if site < 0 || site >= len(m.snap.Sites) {
		return fmt.Errorf("plannerrpc: session: release at site %d of %d", site, len(m.snap.Sites))
	}
	st := &m.snap.Sites[site]
	for k, h := range st.Busy {
		if h.Nodes == nodes && h.Until.Equal(until) {
			st.Busy = slices.Delete(st.Busy, k, k+1)
			st.Free += nodes
			return nil
		}
	}
	return fmt.Errorf("plannerrpc: session: site %s holds no %d node(s) until %s", st.Name, nodes, until.Format(time.RFC3339Nano))
}

// planned records a pass at now that gave plan: every job it started,
// replicated or rejected leaves the queue (a Reserve keeps it waiting).
// Most leave from the front, so the scan stops after the last of them and
// the waiting jobs before it move back, as coalloc's session does.
func (m *mirror) planned(now time.Time, plan *policy.Plan) {
	m.snap.Now = now
	gone := 0
	var ids []string
	for i := range plan.Decisions {
		if plan.Decisions[i].Action != policy.Reserve {
			ids = append(ids, plan.Decisions[i].Job)
		}
	}
	if len(ids) == 0 {
		return
	}
	q := m.snap.Queue
	last := -1
	for x := range q {
		if slices.Contains(ids, q[x].ID) {
			gone++
			last = x
			if gone == len(ids) {
				break
			}
		}
	}
	if last < 0 {
		return
	}
	k := last + 1 // q[k:] stays where it is
	for x := last; x >= 0; x-- {
		if slices.Contains(ids, q[x].ID) {
			continue
		}
		k--
		q[k] = q[x]
	}
	clear(q[:k])
	m.snap.Queue = q[k:]
}

// snapshot is the mirror as a snapshot to seed a session with (the
// caller must not modify it; NewSession copies what it keeps).
func (m *mirror) snapshot() *policy.Snapshot { return &m.snap }

// session is the host's side of a plugin session: a policy.Session that
// buffers changes, checks them against its mirror, and opens (or, after a
// restart or a failed pass, re-opens) the plugin's session from the mirror
// before a pass.
type session struct {
	conn    func() (*Client, uint64) // the current connection and its generation
	m       mirror
	id      uint64 // the plugin's session; 0: none open
	gen     uint64 // the generation id belongs to
	submits []policy.Job
	holds   []*pb.PlannerHoldChange
	closed  bool
	// stream carries the passes of session id (Planner.Passes); stop
	// ends it. Both are nil when id is 0.
	stream pb.Planner_PassesClient
	stop   context.CancelFunc
	// side, when the plugin gave a pass socket, carries the passes
	// instead (stream then only binds it); nil otherwise.
	side *sideClient
}

var _ policy.Session = (*session)(nil)

func newSession(s *policy.Snapshot, conn func() (*Client, uint64)) (*session, error) {
	ss := &session{conn: conn}
	ss.m.seed(s)
	c, gen := conn()
	ctx, cancel := context.WithTimeout(context.Background(), c.callTimeout)
	defer cancel()
	if err := ss.open(ctx, c, gen); err != nil {
		return nil, err
	}
	return ss, nil
}

// Submit implements policy.Session.
func (ss *session) Submit(j policy.Job) {
	ss.m.submit(j)
	if ss.id != 0 {
		ss.submits = append(ss.submits, j)
	}
}

// Hold implements policy.Session, checked against the mirror.
func (ss *session) Hold(site, nodes int, until time.Time) error {
	if err := ss.m.hold(site, nodes, until); err != nil {
		return err
	}
	if ss.id != 0 {
		h := &pb.PlannerHoldChange{Site: int32(site), Nodes: int64(nodes)}
		h.UntilSec, h.UntilNanos = timeToWire(until)
		ss.holds = append(ss.holds, h)
	}
	return nil
}

// Release implements policy.Session, checked against the mirror.
func (ss *session) Release(site, nodes int, until time.Time) error {
	if err := ss.m.release(site, nodes, until); err != nil {
		return err
	}
	if ss.id != 0 {
		h := &pb.PlannerHoldChange{Release: true, Site: int32(site), Nodes: int64(nodes)}
		h.UntilSec, h.UntilNanos = timeToWire(until)
		ss.holds = append(ss.holds, h)
	}
	return nil
}

// Plan implements policy.Session: one message on the pass socket (or the
// Passes stream, for a plugin without one) with
// the buffered changes, after (re-)opening the plugin's session from the
// mirror when the plugin restarted or the last pass failed. The plan is
// the caller's to keep.
func (ss *session) Plan(ctx context.Context, now time.Time) (*policy.Plan, error) {
	if ss.closed {
		return nil, ErrClosed
	}
	if now.Before(ss.m.snap.Now) {
		return nil, fmt.Errorf("plannerrpc: session: plan at %s, before the last pass (%s)", now.Format(time.RFC3339Nano), ss.m.snap.Now.Format(time.RFC3339Nano))
	}
	c, gen := ss.conn()
	if ss.id != 0 && ss.gen != gen {
		ss.drop() // opened on a plugin process that is gone
	}
	if ss.id == 0 {
		if err := ss.open(ctx, c, gen); err != nil {
			return nil, err
		}
	}
	req := &pb.PlannerPassRequest{Session: ss.id, Submits: jobsToProto(ss.submits), Holds: ss.holds}
	req.NowSec, req.NowNanos = timeToWire(now)
	// The caller's ctx bounds this pass: when it ends first, the stream
	// goes (and the next pass opens a new session from the mirror).
	var rep *pb.PlanReply
	var err error
	if ss.side != nil {
		rep, err = ss.side.pass(ctx, req)
	} else {
		stop := context.AfterFunc(ctx, ss.stop)
		err = ss.stream.Send(req)
		if err == nil || err == io.EOF { // io.EOF: the stream ended; Recv says why
			rep, err = ss.stream.Recv()
		}
		stop()
	}
	clear(ss.submits)
	clear(ss.holds)
	ss.submits, ss.holds = ss.submits[:0], ss.holds[:0]
	var plan *policy.Plan
	if err == nil {
		if plan, err = planFromProto(rep.GetPlan()); err != nil {
			err = &RemoteError{Plugin: c.name, Method: "Passes", Msg: "bad plan: " + err.Error()}
		}
	} else if ss.side != nil {
		err = c.classifySide(ctx, err)
	} else {
		err = c.classify(ctx, "Passes", err)
	}
	if err != nil {
		// The plugin may have applied part of the pass: its session no
		// longer matches the mirror. The next pass opens a new one.
		id := ss.id
		ss.drop()
		if ctx.Err() == nil {
			c.closeSession(ctx, id)
		}
		return nil, err
	}
	ss.m.planned(now, plan)
	return plan, nil
}

// open opens a plugin session from the mirror on connection c and the
// stream that carries its passes. The buffered changes are in the mirror,
// so they are dropped.
func (ss *session) open(ctx context.Context, c *Client, gen uint64) error {
	rep, err := c.openSession(ctx, ss.m.snapshot())
	if err != nil {
		return err
	}
	id := rep.GetSession()
	sctx, stop := context.WithCancel(c.done)
	stream, err := c.rpc.Passes(sctx)
	var side *sideClient
	if err == nil && rep.GetPassSocket() != "" {
		// The stream binds the socket to the gRPC connection, then idles.
		if err = stream.Send(&pb.PlannerPassRequest{Session: id, Bind: true}); err == nil {
			if side, err = dialSide(ctx, c.done, rep.GetPassSocket(), rep.GetPassToken()); err != nil {
				stop()
				c.closeSession(ctx, id)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return &RemoteError{Plugin: c.name, Method: "NewSession", Msg: err.Error()}
			}
		}
	}
	if err != nil {
		stop()
		c.closeSession(ctx, id)
		return c.classify(ctx, "Passes", err)
	}
	ss.id, ss.gen, ss.stream, ss.stop, ss.side = id, gen, stream, stop, side
	ss.submits, ss.holds = ss.submits[:0], ss.holds[:0]
	return nil
}

// drop forgets the plugin session and ends its stream.
func (ss *session) drop() {
	if ss.stop != nil {
		ss.stop()
	}
	if ss.side != nil {
		ss.side.close()
	}
	ss.id, ss.stream, ss.stop, ss.side = 0, nil, nil, nil
}

// Close frees the plugin's session. Plan after Close fails with ErrClosed.
func (ss *session) Close(ctx context.Context) error {
	if ss.closed {
		return nil
	}
	ss.closed = true
	if ss.id != 0 {
		c, gen := ss.conn()
		id, same := ss.id, gen == ss.gen
		ss.drop()
		if same {
			c.closeSession(ctx, id)
		}
	}
	return nil
}

// Mirror returns a copy of the session's snapshot as the host knows it (the
// seed plus every change reported, minus the jobs planned away), Quiet, at
// the last pass: what a fallback planner takes over from.
func (ss *session) Mirror() *policy.Snapshot {
	var m mirror
	m.seed(ss.m.snapshot())
	return m.snapshot()
}
