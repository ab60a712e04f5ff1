package backendrpc

import (
	"io/fs"
	"time"

	"github.com/gridsub/gridsub/backends"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

// errorToProto is the server's side of a domain error: every kind err
// matches, and its text. nil stays nil.
func errorToProto(err error) *pb.BackendError {
	if err == nil {
		return nil
	}
	ks := wire.KindsOf(err)
	out := &pb.BackendError{Message: err.Error(), Kinds: make([]pb.BackendErrorKind, len(ks))}
	for i, k := range ks {
		out.Kinds[i] = pb.BackendErrorKind(k)
	}
	return out
}

// errorFromProto is the client's side: a *wire.RemoteError or nil.
func errorFromProto(plugin, method string, e *pb.BackendError) error {
	if e == nil {
		return nil
	}
	ks := make([]wire.Kind, len(e.Kinds))
	for i, k := range e.Kinds {
		ks[i] = wire.Kind(k)
	}
	if len(ks) == 0 && e.Message == "" {
		// An error message with no content still is an error.
		return wire.Decode(plugin, method, []wire.Kind{wire.KindInternal}, "plugin reported an empty error")
	}
	return wire.Decode(plugin, method, ks, e.Message)
}

func specToProto(j *backends.JobSpec) *pb.BackendJobSpec {
	if j == nil {
		return nil
	}
	out := &pb.BackendJobSpec{
		GridId: j.GridID, Component: int64(j.Component), Components: int64(j.Components), Name: j.Name,
		Command: j.Command, Script: j.Script, Env: j.Env, WorkDir: j.WorkDir, Nodes: int64(j.Nodes),
		CoresPerNode: int64(j.CoresPerNode), WalltimeNanos: int64(j.Walltime), Outputs: j.Outputs,
		Reservation: j.Reservation, SimRuntimeNanos: int64(j.Sim.Runtime), SimExitCode: int64(j.Sim.ExitCode),
		MemPerNode: j.MemPerNode, GpusPerNode: int64(j.GPUsPerNode), Partition: j.Partition, Account: j.Account, Setup: j.Setup,
	}
	for _, f := range j.Inputs {
		out.Inputs = append(out.Inputs, &pb.BackendStageFile{Local: f.Local, Remote: f.Remote, Mode: uint32(f.Mode)})
	}
	return out
}

func specFromProto(j *pb.BackendJobSpec) *backends.JobSpec {
	if j == nil {
		return nil
	}
	out := &backends.JobSpec{
		GridID: j.GridId, Component: int(j.Component), Components: int(j.Components), Name: j.Name,
		Command: j.Command, Script: j.Script, Env: j.Env, WorkDir: j.WorkDir, Nodes: int(j.Nodes),
		CoresPerNode: int(j.CoresPerNode), Walltime: time.Duration(j.WalltimeNanos), Outputs: j.Outputs,
		Reservation: j.Reservation,
		Sim:         backends.SimHints{Runtime: time.Duration(j.SimRuntimeNanos), ExitCode: int(j.SimExitCode)},
		MemPerNode:  j.MemPerNode, GPUsPerNode: int(j.GpusPerNode), Partition: j.Partition, Account: j.Account, Setup: j.Setup,
	}
	for _, f := range j.Inputs {
		out.Inputs = append(out.Inputs, backends.StageFile{Local: f.Local, Remote: f.Remote, Mode: fs.FileMode(f.Mode)})
	}
	return out
}

// stateToProto maps a State; StateUnknown is the enum's 0.
func stateToProto(s backends.State) pb.BackendJobState { return pb.BackendJobState(s) }

func stateFromProto(s pb.BackendJobState) backends.State {
	if s < 0 || s > pb.BackendJobState_BACKEND_JOB_STATE_LOST {
		return backends.StateUnknown
	}
	return backends.State(s)
}

func statusToProto(s *backends.JobStatus) *pb.BackendJobStatus {
	return &pb.BackendJobStatus{
		Id: string(s.ID), GridId: s.GridID, Name: s.Name, State: stateToProto(s.State), Reason: s.Reason,
		ExitCode: int64(s.ExitCode), Signal: int64(s.Signal), StartUnixNano: wire.TimeToWire(s.Start),
		EndUnixNano: wire.TimeToWire(s.End), NodeList: s.NodeList,
	}
}

func statusFromProto(s *pb.BackendJobStatus) backends.JobStatus {
	return backends.JobStatus{
		ID: backends.JobID(s.Id), GridID: s.GridId, Name: s.Name, State: stateFromProto(s.State), Reason: s.Reason,
		ExitCode: int(s.ExitCode), Signal: int(s.Signal), Start: wire.TimeFromWire(s.StartUnixNano),
		End: wire.TimeFromWire(s.EndUnixNano), NodeList: s.NodeList,
	}
}

func statusesToProto(in []backends.JobStatus) []*pb.BackendJobStatus {
	out := make([]*pb.BackendJobStatus, len(in))
	for i := range in {
		out[i] = statusToProto(&in[i])
	}
	return out
}

func statusesFromProto(in []*pb.BackendJobStatus) []backends.JobStatus {
	out := make([]backends.JobStatus, len(in))
	for i, s := range in {
		out[i] = statusFromProto(s)
	}
	return out
}

func infoToProto(i *backends.SiteInfo) *pb.BackendSiteInfo {
	out := &pb.BackendSiteInfo{
		Name: i.Name, Kind: i.Kind, Nodes: int64(i.Nodes), FreeNodes: int64(i.FreeNodes),
		CoresPerNode: int64(i.CoresPerNode), Partitions: i.Partitions, Queued: int64(i.Queued), Running: int64(i.Running),
		MemPerNode: i.MemPerNode, GpusPerNode: int64(i.GPUsPerNode), Accounts: i.Accounts,
	}
	for _, a := range i.Busy {
		out.Busy = append(out.Busy, &pb.BackendAllocation{Nodes: int64(a.Nodes), UntilUnixNano: wire.TimeToWire(a.Until)})
	}
	return out
}

func infoFromProto(i *pb.BackendSiteInfo) *backends.SiteInfo {
	out := &backends.SiteInfo{
		Name: i.Name, Kind: i.Kind, Nodes: int(i.Nodes), FreeNodes: int(i.FreeNodes),
		CoresPerNode: int(i.CoresPerNode), Partitions: i.Partitions, Queued: int(i.Queued), Running: int(i.Running),
		MemPerNode: i.MemPerNode, GPUsPerNode: int(i.GpusPerNode), Accounts: i.Accounts,
	}
	if len(i.Busy) > 0 {
		out.Busy = make([]backends.Allocation, len(i.Busy))
		for k, a := range i.Busy {
			out.Busy[k] = backends.Allocation{Nodes: int(a.Nodes), Until: wire.TimeFromWire(a.UntilUnixNano)}
		}
	}
	return out
}

func resvSpecToProto(r *backends.ReservationSpec) *pb.BackendReservationSpec {
	return &pb.BackendReservationSpec{Name: r.Name, StartUnixNano: wire.TimeToWire(r.Start),
		DurationNanos: int64(r.Duration), Nodes: int64(r.Nodes), Users: r.Users}
}

func resvSpecFromProto(r *pb.BackendReservationSpec) *backends.ReservationSpec {
	if r == nil {
		return &backends.ReservationSpec{}
	}
	return &backends.ReservationSpec{Name: r.Name, Start: wire.TimeFromWire(r.StartUnixNano),
		Duration: time.Duration(r.DurationNanos), Nodes: int(r.Nodes), Users: r.Users}
}

func resvToProto(r *backends.Reservation) *pb.BackendReservation {
	return &pb.BackendReservation{Id: string(r.ID), StartUnixNano: wire.TimeToWire(r.Start),
		EndUnixNano: wire.TimeToWire(r.End), Nodes: int64(r.Nodes), NodeList: r.NodeList, State: r.State}
}

func resvFromProto(r *pb.BackendReservation) *backends.Reservation {
	return &backends.Reservation{ID: backends.ResvID(r.Id), Start: wire.TimeFromWire(r.StartUnixNano),
		End: wire.TimeFromWire(r.EndUnixNano), Nodes: int(r.Nodes), NodeList: r.NodeList, State: r.State}
}

func capsToProto(c backends.Capabilities, clock bool) *pb.BackendCapabilities {
	return &pb.BackendCapabilities{Find: c.Find, Fetch: c.Fetch, Reserve: c.Reserve, Push: c.Push,
		Link: c.Link, Conn: c.Conn, SimClock: clock, Batch: c.Batch}
}

func capsFromProto(c *pb.BackendCapabilities) backends.Capabilities {
	if c == nil {
		return backends.Capabilities{}
	}
	return backends.Capabilities{Find: c.Find, Fetch: c.Fetch, Reserve: c.Reserve, Push: c.Push, Link: c.Link, Conn: c.Conn,
		Batch: c.Batch}
}
