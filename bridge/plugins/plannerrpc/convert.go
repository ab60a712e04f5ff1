package plannerrpc

import (
	"fmt"
	"time"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The converters between policy's plain types and planner.proto's messages.
// Both directions are exact: a value converted there and back is equal
// (reflect.DeepEqual) to the original, up to time zones (times come back in
// UTC) and the monotonic clock reading (dropped). TestConvertRoundTrip holds
// them to it.

// timeToProto maps the zero time to an absent Timestamp.
func timeToProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return &timestamppb.Timestamp{Seconds: t.Unix(), Nanos: int32(t.Nanosecond())}
}

// timeFromProto maps an absent Timestamp to the zero time.
func timeFromProto(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return time.Unix(t.GetSeconds(), int64(t.GetNanos())).UTC()
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
	if v == nil {
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

func linkToProto(l policy.Link) *pb.PlannerLink {
	return &pb.PlannerLink{SecPerByte: l.SecPerByte, LatencyNs: int64(l.Latency)}
}

func linkFromProto(l *pb.PlannerLink) policy.Link {
	return policy.Link{SecPerByte: l.GetSecPerByte(), Latency: time.Duration(l.GetLatencyNs())}
}

func jobToProto(j *policy.Job) *pb.PlannerJob {
	return &pb.PlannerJob{
		Id: j.ID, Width: int64(j.Width), EstimateNs: int64(j.Estimate), Submit: timeToProto(j.Submit),
		Origin: int32(j.Origin), DataSize: j.DataSize, AllowedSet: j.Allowed != nil, Allowed: intsToProto(j.Allowed),
		Preferred: intsToProto(j.Preferred), Deadline: timeToProto(j.Deadline), NoSplit: j.NoSplit,
	}
}

func jobFromProto(j *pb.PlannerJob) policy.Job {
	return policy.Job{
		ID: j.GetId(), Width: int(j.GetWidth()), Estimate: time.Duration(j.GetEstimateNs()), Submit: timeFromProto(j.GetSubmit()),
		Origin: int(j.GetOrigin()), DataSize: j.GetDataSize(), Allowed: intsFromProto(j.GetAllowed(), j.GetAllowedSet()),
		Preferred: intsFromProto(j.GetPreferred(), false), Deadline: timeFromProto(j.GetDeadline()), NoSplit: j.GetNoSplit(),
	}
}

func jobsToProto(js []policy.Job) []*pb.PlannerJob {
	if len(js) == 0 {
		return nil
	}
	out := make([]*pb.PlannerJob, len(js))
	for i := range js {
		out[i] = jobToProto(&js[i])
	}
	return out
}

func siteToProto(s *policy.Site) *pb.PlannerSite {
	out := &pb.PlannerSite{Name: s.Name, Nodes: int64(s.Nodes), Free: int64(s.Free), H: s.H, Trust: s.Trust, Down: s.Down}
	if len(s.Busy) > 0 {
		out.Busy = make([]*pb.PlannerHold, len(s.Busy))
		for i, h := range s.Busy {
			out.Busy[i] = &pb.PlannerHold{Nodes: int64(h.Nodes), Until: timeToProto(h.Until)}
		}
	}
	return out
}

func siteFromProto(s *pb.PlannerSite) policy.Site {
	out := policy.Site{Name: s.GetName(), Nodes: int(s.GetNodes()), Free: int(s.GetFree()), H: s.GetH(), Trust: s.GetTrust(), Down: s.GetDown()}
	if b := s.GetBusy(); len(b) > 0 {
		out.Busy = make([]policy.Hold, len(b))
		for i, h := range b {
			out.Busy[i] = policy.Hold{Nodes: int(h.GetNodes()), Until: timeFromProto(h.GetUntil())}
		}
	}
	return out
}

// snapshotToProto converts s (which it does not modify).
func snapshotToProto(s *policy.Snapshot) *pb.PlannerSnapshot {
	out := &pb.PlannerSnapshot{Now: timeToProto(s.Now), Queue: jobsToProto(s.Queue), LinksSet: s.Links != nil,
		MultiSite: s.MultiSite, Quiet: s.Quiet}
	if len(s.Sites) > 0 {
		out.Sites = make([]*pb.PlannerSite, len(s.Sites))
		for i := range s.Sites {
			out.Sites[i] = siteToProto(&s.Sites[i])
		}
	}
	if len(s.Links) > 0 {
		out.Links = make([]*pb.PlannerLinkRow, len(s.Links))
		for i, row := range s.Links {
			r := &pb.PlannerLinkRow{To: make([]*pb.PlannerLink, len(row))}
			for k, l := range row {
				r.To[k] = linkToProto(l)
			}
			out.Links[i] = r
		}
	}
	if len(s.Uplinks) > 0 {
		out.Uplinks = make([]*pb.PlannerLink, len(s.Uplinks))
		for i, l := range s.Uplinks {
			out.Uplinks[i] = linkToProto(l)
		}
	}
	return out
}

// snapshotFromProto converts a snapshot the host sent. A nil snapshot is
// an error: no planner can plan nothing.
func snapshotFromProto(s *pb.PlannerSnapshot) (*policy.Snapshot, error) {
	if s == nil {
		return nil, fmt.Errorf("no snapshot")
	}
	out := &policy.Snapshot{Now: timeFromProto(s.GetNow()), MultiSite: s.GetMultiSite(), Quiet: s.GetQuiet()}
	if ss := s.GetSites(); len(ss) > 0 {
		out.Sites = make([]policy.Site, len(ss))
		for i, x := range ss {
			out.Sites[i] = siteFromProto(x)
		}
	}
	if q := s.GetQueue(); len(q) > 0 {
		out.Queue = make([]policy.Job, len(q))
		for i, j := range q {
			out.Queue[i] = jobFromProto(j)
		}
	}
	if s.GetLinksSet() {
		out.Links = make([][]policy.Link, len(s.GetLinks()))
		for i, row := range s.GetLinks() {
			out.Links[i] = make([]policy.Link, len(row.GetTo()))
			for k, l := range row.GetTo() {
				out.Links[i][k] = linkFromProto(l)
			}
		}
	}
	if u := s.GetUplinks(); len(u) > 0 {
		out.Uplinks = make([]policy.Link, len(u))
		for i, l := range u {
			out.Uplinks[i] = linkFromProto(l)
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
	out := &pb.PlannerOption{Start: timeToProto(o.Start), RuntimeNs: int64(o.Runtime), TransferNs: int64(o.Transfer), Immediate: o.Immediate}
	if len(o.Parts) > 0 {
		out.Parts = make([]*pb.PlannerPart, len(o.Parts))
		for i, p := range o.Parts {
			out.Parts[i] = &pb.PlannerPart{Site: int32(p.Site), Nodes: int64(p.Nodes)}
		}
	}
	return out
}

func optionFromProto(o *pb.PlannerOption) policy.Option {
	out := policy.Option{Start: timeFromProto(o.GetStart()), Runtime: time.Duration(o.GetRuntimeNs()),
		Transfer: time.Duration(o.GetTransferNs()), Immediate: o.GetImmediate()}
	if ps := o.GetParts(); len(ps) > 0 {
		out.Parts = make([]policy.Part, len(ps))
		for i, p := range ps {
			out.Parts[i] = policy.Part{Site: int(p.GetSite()), Nodes: int(p.GetNodes())}
		}
	}
	return out
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
	if len(p.Pending) > 0 {
		out.Pending = make([]*pb.PlannerPending, len(p.Pending))
		for i, x := range p.Pending {
			out.Pending[i] = &pb.PlannerPending{Job: x.Job, Status: statusToProto(x.Status)}
		}
	}
	return out
}

// planFromProto converts a plugin's plan, refusing an action or a status
// code policy does not have (a plugin built against another protocol, or
// a field left unset): acting on it could start the wrong thing.
func planFromProto(p *pb.PlannerPlan) (*policy.Plan, error) {
	out := &policy.Plan{}
	if ds := p.GetDecisions(); len(ds) > 0 {
		out.Decisions = make([]policy.Decision, len(ds))
		for i, d := range ds {
			a, err := actionFromProto(d.GetAction())
			if err != nil {
				return nil, fmt.Errorf("decision %d (job %q): %w", i, d.GetJob(), err)
			}
			st, err := statusFromProto(d.GetStatus())
			if err != nil {
				return nil, fmt.Errorf("decision %d (job %q): %w", i, d.GetJob(), err)
			}
			x := policy.Decision{Job: d.GetJob(), Action: a, Chosen: optionFromProto(d.GetChosen()), Backfilled: d.GetBackfilled(), Status: st}
			if b := d.GetBeaten(); len(b) > 0 {
				x.Beaten = make([]policy.Option, len(b))
				for k, o := range b {
					x.Beaten[k] = optionFromProto(o)
				}
			}
			out.Decisions[i] = x
		}
	}
	if ps := p.GetPending(); len(ps) > 0 {
		out.Pending = make([]policy.Pending, len(ps))
		for i, x := range ps {
			st, err := statusFromProto(x.GetStatus())
			if err != nil {
				return nil, fmt.Errorf("pending %d (job %q): %w", i, x.GetJob(), err)
			}
			out.Pending[i] = policy.Pending{Job: x.GetJob(), Status: st}
		}
	}
	return out, nil
}
