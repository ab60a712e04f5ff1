package plannerrpc

import (
	"fmt"
	"time"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// The converters between policy's plain types and planner.proto's messages.
// Both directions are exact: a value converted there and back is equal
// (reflect.DeepEqual) to the original, up to time zones (times come back in
// UTC), the monotonic clock reading (dropped), and empty slices, which come
// back nil (except Job.Allowed and Snapshot.Links, whose nil means
// something). TestConvertRoundTrip holds them to it.

// year1 is the Unix time of 0001-01-01T00:00:00Z, Go's zero time: the
// wire counts seconds from it, so that the zero time is 0, 0.
const year1 = -62135596800

func timeToWire(t time.Time) (int64, int32) {
	if t.IsZero() {
		return 0, 0
	}
	return t.Unix() - year1, int32(t.Nanosecond())
}

func timeFromWire(sec int64, nanos int32) time.Time {
	if sec == 0 && nanos == 0 {
		return time.Time{}
	}
	return time.Unix(sec+year1, int64(nanos)).UTC()
}

// codeToProto: policy.Code counts from 0 (Success); the wire pins 0 to
// UNSPECIFIED, so every code moves up one.
func codeToProto(c policy.Code) pb.PlannerCode { return pb.PlannerCode(int32(c) + 1) }

func codeFromProto(c pb.PlannerCode) (policy.Code, error) {
	if c < pb.PlannerCode_PLANNER_CODE_SUCCESS || c > pb.PlannerCode_PLANNER_CODE_ERROR {
		return 0, fmt.Errorf("status code %d is not one of policy's", int32(c))
	}
	return policy.Code(c - 1), nil
}

// actionToProto: policy.Action counts from 1 (Start), as the wire does.
func actionToProto(a policy.Action) pb.PlannerAction { return pb.PlannerAction(a) }

func actionFromProto(a pb.PlannerAction) (policy.Action, error) {
	if a < pb.PlannerAction_PLANNER_ACTION_START || a > pb.PlannerAction_PLANNER_ACTION_REPLICATE {
		return 0, fmt.Errorf("action %d is not one of policy's", int32(a))
	}
	return policy.Action(a), nil
}

func intsToProto(v []int) []int32 {
	if len(v) == 0 {
		return nil
	}
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func intsFromProto(v []int32, keepEmpty bool) []int {
	if len(v) == 0 {
		if keepEmpty {
			return []int{}
		}
		return nil
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// jobsToProto puts a list of jobs in columns (nil for none).
func jobsToProto(js []policy.Job) *pb.PlannerJobs {
	if len(js) == 0 {
		return nil
	}
	n := len(js)
	out := &pb.PlannerJobs{Id: make([]string, n), Width: make([]int64, n), EstimateNs: make([]int64, n),
		SubmitSec: make([]int64, n), SubmitNanos: make([]int32, n), Origin: make([]int32, n),
		DataSize: make([]int64, n), NoSplit: make([]bool, n)}
	for i := range js {
		j := &js[i]
		out.Id[i], out.Width[i], out.EstimateNs[i] = j.ID, int64(j.Width), int64(j.Estimate)
		out.SubmitSec[i], out.SubmitNanos[i] = timeToWire(j.Submit)
		out.Origin[i], out.DataSize[i], out.NoSplit[i] = int32(j.Origin), j.DataSize, j.NoSplit
		if j.Allowed != nil || len(j.Preferred) > 0 || !j.Deadline.IsZero() || !j.PerNode.Zero() || j.Worth != (policy.Worth{}) || j.BestEffort {
			x := &pb.PlannerJobExtra{Index: int32(i), AllowedSet: j.Allowed != nil, Allowed: intsToProto(j.Allowed),
				Preferred: intsToProto(j.Preferred), PerNodeCores: int64(j.PerNode.Cores), PerNodeMemBytes: j.PerNode.MemBytes,
				PerNodeGpus: int64(j.PerNode.GPUs), WorthShape: int32(j.Worth.Shape), WorthA: j.Worth.A, WorthB: j.Worth.B,
				WorthC: j.Worth.C, BestEffort: j.BestEffort}
			x.DeadlineSec, x.DeadlineNanos = timeToWire(j.Deadline)
			out.Extras = append(out.Extras, x)
		}
	}
	return out
}

// jobsFromProto reads jobs from columns, refusing columns of different
// lengths (a job would get another's fields).
func jobsFromProto(c *pb.PlannerJobs) ([]policy.Job, error) {
	n := len(c.GetId())
	if n == 0 && len(c.GetExtras()) == 0 {
		return nil, nil
	}
	for _, col := range []struct {
		name string
		len  int
	}{{"width", len(c.GetWidth())}, {"estimate_ns", len(c.GetEstimateNs())}, {"submit_sec", len(c.GetSubmitSec())},
		{"submit_nanos", len(c.GetSubmitNanos())}, {"origin", len(c.GetOrigin())}, {"data_size", len(c.GetDataSize())},
		{"no_split", len(c.GetNoSplit())}} {
		if col.len != n {
			return nil, fmt.Errorf("jobs: column %s has %d entries for %d jobs", col.name, col.len, n)
		}
	}
	out := make([]policy.Job, n)
	for i := range out {
		out[i] = policy.Job{ID: c.Id[i], Width: int(c.Width[i]), Estimate: time.Duration(c.EstimateNs[i]),
			Submit: timeFromWire(c.SubmitSec[i], c.SubmitNanos[i]), Origin: int(c.Origin[i]), DataSize: c.DataSize[i], NoSplit: c.NoSplit[i]}
	}
	last := -1
	for _, x := range c.GetExtras() {
		i := int(x.GetIndex())
		if i <= last || i >= n {
			return nil, fmt.Errorf("jobs: extra for job %d of %d (after job %d)", i, n, last)
		}
		last = i
		out[i].Allowed = intsFromProto(x.GetAllowed(), x.GetAllowedSet())
		out[i].Preferred = intsFromProto(x.GetPreferred(), false)
		out[i].Deadline = timeFromWire(x.GetDeadlineSec(), x.GetDeadlineNanos())
		out[i].PerNode = policy.NodeShape{Cores: int(x.GetPerNodeCores()), MemBytes: x.GetPerNodeMemBytes(), GPUs: int(x.GetPerNodeGpus())}
		out[i].Worth = policy.Worth{Shape: policy.Shape(x.GetWorthShape()), A: x.GetWorthA(), B: x.GetWorthB(), C: x.GetWorthC()}
		out[i].BestEffort = x.GetBestEffort()
	}
	return out, nil
}

func siteToProto(s *policy.Site) *pb.PlannerSite {
	out := &pb.PlannerSite{Name: s.Name, Nodes: int64(s.Nodes), Free: int64(s.Free), H: s.H, Trust: s.Trust, Down: s.Down,
		NodeCores: int64(s.Shape.Cores), NodeMemBytes: s.Shape.MemBytes, NodeGpus: int64(s.Shape.GPUs)}
	if n := len(s.Busy); n > 0 {
		out.BusyNodes, out.BusyUntilSec, out.BusyUntilNanos = make([]int64, n), make([]int64, n), make([]int32, n)
		for i, h := range s.Busy {
			out.BusyNodes[i] = int64(h.Nodes)
			out.BusyUntilSec[i], out.BusyUntilNanos[i] = timeToWire(h.Until)
		}
	}
	return out
}

func siteFromProto(s *pb.PlannerSite) (policy.Site, error) {
	out := policy.Site{Name: s.GetName(), Nodes: int(s.GetNodes()), Free: int(s.GetFree()), H: s.GetH(), Trust: s.GetTrust(), Down: s.GetDown()}
	out.Shape = policy.NodeShape{Cores: int(s.GetNodeCores()), MemBytes: s.GetNodeMemBytes(), GPUs: int(s.GetNodeGpus())}
	n := len(s.GetBusyNodes())
	if len(s.GetBusyUntilSec()) != n || len(s.GetBusyUntilNanos()) != n {
		return out, fmt.Errorf("site %s: busy columns of %d, %d and %d entries", out.Name, n, len(s.GetBusyUntilSec()), len(s.GetBusyUntilNanos()))
	}
	if n > 0 {
		out.Busy = make([]policy.Hold, n)
		for i := range out.Busy {
			out.Busy[i] = policy.Hold{Nodes: int(s.BusyNodes[i]), Until: timeFromWire(s.BusyUntilSec[i], s.BusyUntilNanos[i])}
		}
	}
	return out, nil
}

// snapshotToProto converts s (which it does not modify).
func snapshotToProto(s *policy.Snapshot) *pb.PlannerSnapshot {
	out := &pb.PlannerSnapshot{Queue: jobsToProto(s.Queue), LinksSet: s.Links != nil, MultiSite: s.MultiSite, Quiet: s.Quiet}
	out.NowSec, out.NowNanos = timeToWire(s.Now)
	if len(s.Sites) > 0 {
		out.Sites = make([]*pb.PlannerSite, len(s.Sites))
		for i := range s.Sites {
			out.Sites[i] = siteToProto(&s.Sites[i])
		}
	}
	for _, row := range s.Links {
		for _, l := range row {
			out.LinkSecPerByte = append(out.LinkSecPerByte, l.SecPerByte)
			out.LinkLatencyNs = append(out.LinkLatencyNs, int64(l.Latency))
		}
	}
	for _, l := range s.Uplinks {
		out.UplinkSecPerByte = append(out.UplinkSecPerByte, l.SecPerByte)
		out.UplinkLatencyNs = append(out.UplinkLatencyNs, int64(l.Latency))
	}
	return out
}

// snapshotFromProto converts a snapshot the host sent. A nil snapshot is
// an error: no planner can plan nothing. Links travel as a square matrix:
// a snapshot whose Links has rows of other lengths (which every planner
// refuses) cannot be sent.
func snapshotFromProto(s *pb.PlannerSnapshot) (*policy.Snapshot, error) {
	if s == nil {
		return nil, fmt.Errorf("no snapshot")
	}
	out := &policy.Snapshot{Now: timeFromWire(s.GetNowSec(), s.GetNowNanos()), MultiSite: s.GetMultiSite(), Quiet: s.GetQuiet()}
	if ss := s.GetSites(); len(ss) > 0 {
		out.Sites = make([]policy.Site, len(ss))
		for i, x := range ss {
			var err error
			if out.Sites[i], err = siteFromProto(x); err != nil {
				return nil, err
			}
		}
	}
	var err error
	if out.Queue, err = jobsFromProto(s.GetQueue()); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	n := len(out.Sites)
	if s.GetLinksSet() {
		if len(s.GetLinkSecPerByte()) != n*n || len(s.GetLinkLatencyNs()) != n*n {
			return nil, fmt.Errorf("links: %d and %d entries for %d sites (want %d)", len(s.GetLinkSecPerByte()), len(s.GetLinkLatencyNs()), n, n*n)
		}
		out.Links = make([][]policy.Link, n)
		for i := range out.Links {
			out.Links[i] = make([]policy.Link, n)
			for k := range out.Links[i] {
				out.Links[i][k] = policy.Link{SecPerByte: s.LinkSecPerByte[i*n+k], Latency: time.Duration(s.LinkLatencyNs[i*n+k])}
			}
		}
	}
	if u := s.GetUplinkSecPerByte(); len(u) > 0 || len(s.GetUplinkLatencyNs()) > 0 {
		if len(u) != len(s.GetUplinkLatencyNs()) {
			return nil, fmt.Errorf("uplinks: columns of %d and %d entries", len(u), len(s.GetUplinkLatencyNs()))
		}
		out.Uplinks = make([]policy.Link, len(u))
		for i := range out.Uplinks {
			out.Uplinks[i] = policy.Link{SecPerByte: u[i], Latency: time.Duration(s.UplinkLatencyNs[i])}
		}
	}
	return out, nil
}

func statusToProto(s policy.Status) *pb.PlannerStatus {
	return &pb.PlannerStatus{Code: codeToProto(s.Code), Reasons: s.Reasons, Plugin: s.Plugin}
}

func statusFromProto(s *pb.PlannerStatus) (policy.Status, error) {
	c, err := codeFromProto(s.GetCode())
	if err != nil {
		return policy.Status{}, err
	}
	return policy.Status{Code: c, Reasons: s.GetReasons(), Plugin: s.GetPlugin()}, nil
}

func optionToProto(o *policy.Option) *pb.PlannerOption {
	out := &pb.PlannerOption{RuntimeNs: int64(o.Runtime), TransferNs: int64(o.Transfer), Immediate: o.Immediate}
	out.StartSec, out.StartNanos = timeToWire(o.Start)
	if n := len(o.Parts); n > 0 {
		out.PartSite, out.PartNodes = make([]int32, n), make([]int64, n)
		for i, p := range o.Parts {
			out.PartSite[i], out.PartNodes[i] = int32(p.Site), int64(p.Nodes)
		}
	}
	return out
}

func optionFromProto(o *pb.PlannerOption) (policy.Option, error) {
	out := policy.Option{Start: timeFromWire(o.GetStartSec(), o.GetStartNanos()), Runtime: time.Duration(o.GetRuntimeNs()),
		Transfer: time.Duration(o.GetTransferNs()), Immediate: o.GetImmediate()}
	n := len(o.GetPartSite())
	if len(o.GetPartNodes()) != n {
		return out, fmt.Errorf("parts: %d sites for %d node counts", n, len(o.GetPartNodes()))
	}
	if n > 0 {
		out.Parts = make([]policy.Part, n)
		for i := range out.Parts {
			out.Parts[i] = policy.Part{Site: int(o.PartSite[i]), Nodes: int(o.PartNodes[i])}
		}
	}
	return out, nil
}

// planToProto converts a plan (a nil plan is an empty one).
func planToProto(p *policy.Plan) *pb.PlannerPlan {
	out := &pb.PlannerPlan{}
	if p == nil {
		return out
	}
	if len(p.Decisions) > 0 {
		out.Decisions = make([]*pb.PlannerDecision, len(p.Decisions))
		for i := range p.Decisions {
			d := &p.Decisions[i]
			x := &pb.PlannerDecision{Job: d.Job, Action: actionToProto(d.Action), Chosen: optionToProto(&d.Chosen),
				Backfilled: d.Backfilled, Status: statusToProto(d.Status)}
			if len(d.Beaten) > 0 {
				x.Beaten = make([]*pb.PlannerOption, len(d.Beaten))
				for k := range d.Beaten {
					x.Beaten[k] = optionToProto(&d.Beaten[k])
				}
			}
			out.Decisions[i] = x
		}
	}
	if n := len(p.Pending); n > 0 {
		l := &pb.PlannerPendingList{Job: make([]string, n), Code: make([]pb.PlannerCode, n), Plugin: make([]int32, n), ReasonCount: make([]int32, n)}
		index := map[string]int32{}
		str := func(s string) int32 {
			k, ok := index[s]
			if !ok {
				k = int32(len(l.Strings))
				index[s] = k
				l.Strings = append(l.Strings, s)
			}
			return k
		}
		for i, x := range p.Pending {
			l.Job[i], l.Code[i], l.Plugin[i], l.ReasonCount[i] = x.Job, codeToProto(x.Status.Code), str(x.Status.Plugin), int32(len(x.Status.Reasons))
			for _, r := range x.Status.Reasons {
				l.Reason = append(l.Reason, str(r))
			}
		}
		out.Pending = l
	}
	return out
}

// planFromProto converts a plugin's plan, refusing an action or a status
// code policy does not have (a plugin built against another protocol, or
// a field left unset) and columns that do not line up: acting on them
// could start the wrong thing.
func planFromProto(p *pb.PlannerPlan) (*policy.Plan, error) {
	out := &policy.Plan{}
	if ds := p.GetDecisions(); len(ds) > 0 {
		out.Decisions = make([]policy.Decision, len(ds))
		for i, d := range ds {
			bad := func(err error) error { return fmt.Errorf("decision %d (job %q): %w", i, d.GetJob(), err) }
			a, err := actionFromProto(d.GetAction())
			if err != nil {
				return nil, bad(err)
			}
			st, err := statusFromProto(d.GetStatus())
			if err != nil {
				return nil, bad(err)
			}
			chosen, err := optionFromProto(d.GetChosen())
			if err != nil {
				return nil, bad(err)
			}
			x := policy.Decision{Job: d.GetJob(), Action: a, Chosen: chosen, Backfilled: d.GetBackfilled(), Status: st}
			if b := d.GetBeaten(); len(b) > 0 {
				x.Beaten = make([]policy.Option, len(b))
				for k, o := range b {
					if x.Beaten[k], err = optionFromProto(o); err != nil {
						return nil, bad(err)
					}
				}
			}
			out.Decisions[i] = x
		}
	}
	if l := p.GetPending(); len(l.GetJob()) > 0 {
		n := len(l.Job)
		if len(l.GetCode()) != n || len(l.GetPlugin()) != n || len(l.GetReasonCount()) != n {
			return nil, fmt.Errorf("pending: columns of %d, %d, %d and %d entries", n, len(l.GetCode()), len(l.GetPlugin()), len(l.GetReasonCount()))
		}
		strs := l.GetStrings()
		str := func(k int32) (string, error) {
			if k < 0 || int(k) >= len(strs) {
				return "", fmt.Errorf("string %d of %d", k, len(strs))
			}
			return strs[k], nil
		}
		// Every reason, resolved, in one slice the statuses share.
		reasons := make([]string, len(l.GetReason()))
		for i, k := range l.GetReason() {
			var err error
			if reasons[i], err = str(k); err != nil {
				return nil, fmt.Errorf("pending: reason %d: %w", i, err)
			}
		}
		out.Pending = make([]policy.Pending, n)
		r := reasons
		for i := range out.Pending {
			bad := func(err error) error { return fmt.Errorf("pending %d (job %q): %w", i, l.Job[i], err) }
			c, err := codeFromProto(l.Code[i])
			if err != nil {
				return nil, bad(err)
			}
			plugin, err := str(l.Plugin[i])
			if err != nil {
				return nil, bad(err)
			}
			k := int(l.ReasonCount[i])
			if k < 0 || k > len(r) {
				return nil, bad(fmt.Errorf("%d reasons, %d left", k, len(r)))
			}
			st := policy.Status{Code: c, Plugin: plugin}
			if k > 0 {
				st.Reasons = r[:k:k]
			}
			r = r[k:]
			out.Pending[i] = policy.Pending{Job: l.Job[i], Status: st}
		}
		if len(r) > 0 {
			return nil, fmt.Errorf("pending: %d reasons left over", len(r))
		}
	}
	return out, nil
}
