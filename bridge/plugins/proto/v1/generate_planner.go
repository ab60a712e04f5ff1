package v1

// planner.proto → planner.pb.go, planner_grpc.pb.go. Needs protoc and the
// generators pinned to go.mod's versions:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.3.0
//
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative planner.proto
