package v1

// The policy kinds' protocols → *.pb.go, *_grpc.pb.go. Needs protoc and the
// generators pinned to go.mod's versions (see generate_planner.go);
// TestPolicyGeneratedCodeIsFresh holds the committed code to the .proto.
//
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative policy_common.proto feasibility.proto admission.proto trust.proto tiering.proto remap.proto order.proto
