// Package v1 is the generated protobuf code of gridsub's plugin protocol,
// version 1 (backend.proto; the planner's protocol sits beside it). Only
// the plugin layer's shims import it: domain types never do.
//
// Regenerate with `go generate ./...` from the repository root; it needs
// protoc and the generators at the versions the committed code names
// (protoc-gen-go matching go.mod's google.golang.org/protobuf,
// protoc-gen-go-grpc v1.3.0 for go.mod's grpc):
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.3.0
//
// TestGeneratedCodeIsFresh fails when the committed code is stale.
package v1

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative backend.proto
