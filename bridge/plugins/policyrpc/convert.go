package policyrpc

import (
	"fmt"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// What several kinds' converters share, over planner.proto's messages.

func tw(t time.Time) (int64, int32) { return plannerrpc.TimeToWire(t) }

func tf(sec int64, nanos int32) time.Time { return plannerrpc.TimeFromWire(sec, nanos) }

// snapToProto converts a snapshot; nil stays unset.
func snapToProto(s *policy.Snapshot) *pb.PlannerSnapshot {
	if s == nil {
		return nil
	}
	return plannerrpc.SnapshotToProto(s)
}

// snapFromProto converts a snapshot; unset gives nil.
func snapFromProto(s *pb.PlannerSnapshot) (*policy.Snapshot, error) {
	if s == nil {
		return nil, nil
	}
	return plannerrpc.SnapshotFromProto(s)
}

// partsToProto carries parts as an option with parts only; nil stays
// unset.
func partsToProto(ps []policy.Part) *pb.PlannerOption {
	if ps == nil {
		return nil
	}
	return plannerrpc.OptionToProto(&policy.Option{Parts: ps})
}

func partsFromProto(o *pb.PlannerOption) ([]policy.Part, error) {
	if o == nil {
		return nil, nil
	}
	x, err := plannerrpc.OptionFromProto(o)
	if err != nil {
		return nil, err
	}
	if x.Parts == nil {
		return []policy.Part{}, nil // set but empty
	}
	return x.Parts, nil
}

// jobToProto carries one job as a one-row PlannerJobs; nil stays unset.
func jobToProto(j *policy.Job) *pb.PlannerJobs {
	if j == nil {
		return nil
	}
	return plannerrpc.JobsToProto([]policy.Job{*j})
}

func jobFromProto(c *pb.PlannerJobs) (*policy.Job, error) {
	if c == nil {
		return nil, nil
	}
	js, err := plannerrpc.JobsFromProto(c)
	if err != nil {
		return nil, err
	}
	if len(js) != 1 {
		return nil, fmt.Errorf("%d jobs where one was expected", len(js))
	}
	return &js[0], nil
}

func optionToProto(o policy.Option) *pb.PlannerOption { return plannerrpc.OptionToProto(&o) }

func optionFromProto(o *pb.PlannerOption) (policy.Option, error) {
	if o == nil {
		return policy.Option{}, nil
	}
	return plannerrpc.OptionFromProto(o)
}

func stringsOrNil(set bool, v []string) []string {
	if !set {
		return nil
	}
	if v == nil {
		return []string{}
	}
	return v
}
