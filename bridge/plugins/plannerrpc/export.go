package plannerrpc

import (
	"time"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// The converters of the messages planner.proto shares with the other
// policy kinds' protocols (bridge/plugins/policyrpc): a snapshot, a job
// list, a status, a plan. Each FromProto checks what it decodes and
// fails on what a well-behaved peer never sends.

// SnapshotToProto encodes a policy.Snapshot.
func SnapshotToProto(s *policy.Snapshot) *pb.PlannerSnapshot { return snapshotToProto(s) }

// SnapshotFromProto decodes a policy.Snapshot.
func SnapshotFromProto(s *pb.PlannerSnapshot) (*policy.Snapshot, error) { return snapshotFromProto(s) }

// JobsToProto encodes jobs in columns.
func JobsToProto(js []policy.Job) *pb.PlannerJobs { return jobsToProto(js) }

// JobsFromProto decodes jobs from columns.
func JobsFromProto(c *pb.PlannerJobs) ([]policy.Job, error) { return jobsFromProto(c) }

// SiteToProto encodes a policy.Site.
func SiteToProto(s *policy.Site) *pb.PlannerSite { return siteToProto(s) }

// SiteFromProto decodes a policy.Site.
func SiteFromProto(s *pb.PlannerSite) (policy.Site, error) { return siteFromProto(s) }

// StatusToProto encodes a policy.Status.
func StatusToProto(s policy.Status) *pb.PlannerStatus { return statusToProto(s) }

// StatusFromProto decodes a policy.Status.
func StatusFromProto(s *pb.PlannerStatus) (policy.Status, error) { return statusFromProto(s) }

// OptionToProto encodes a policy.Option.
func OptionToProto(o *policy.Option) *pb.PlannerOption { return optionToProto(o) }

// OptionFromProto decodes a policy.Option.
func OptionFromProto(o *pb.PlannerOption) (policy.Option, error) { return optionFromProto(o) }

// PlanToProto encodes a policy.Plan.
func PlanToProto(p *policy.Plan) *pb.PlannerPlan { return planToProto(p) }

// PlanFromProto decodes a policy.Plan.
func PlanFromProto(p *pb.PlannerPlan) (*policy.Plan, error) { return planFromProto(p) }

// TimeToWire encodes a time as planner.proto's X_sec, X_nanos pair (the
// zero time is 0, 0).
func TimeToWire(t time.Time) (int64, int32) { return timeToWire(t) }

// TimeFromWire decodes an X_sec, X_nanos pair (in UTC).
func TimeFromWire(sec int64, nanos int32) time.Time { return timeFromWire(sec, nanos) }
