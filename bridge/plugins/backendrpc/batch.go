package backendrpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/gridsub/gridsub/backends"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

var _ backends.BatchSubmitter = (*Client)(nil)

// SubmitBatch implements backends.BatchSubmitter over one RPC. Each
// result's error keeps its kinds (ErrRejected, ErrOutcomeUnknown, ...). When
// the call as a whole fails — the plugin exited mid-call, the reply is
// malformed — no result can be trusted: every job gets that error, and
// since the plugin may have sent some of them to the site it also wraps
// ErrOutcomeUnknown (the caller looks their tags up before resubmitting).
// A domain error of the call as a whole (the plugin is not configured) is
// every job's error as it is: nothing was sent.
func (c *Client) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	out := make([]backends.SubmitResult, len(specs))
	all := func(err error) []backends.SubmitResult {
		for i := range out {
			out[i] = backends.SubmitResult{Err: err}
		}
		return out
	}
	req := &pb.BackendSubmitBatchRequest{Specs: make([]*pb.BackendJobSpec, len(specs))}
	for i, s := range specs {
		req.Specs[i] = specToProto(s)
	}
	r, err := call(c, ctx, "SubmitBatch", func(ctx context.Context) (*pb.BackendSubmitBatchReply, error) {
		return c.rpc.SubmitBatch(ctx, req)
	})
	if err != nil {
		if errors.Is(err, backends.ErrUnsupported) {
			return all(err) // the plugin has no such call: nothing was sent
		}
		return all(fmt.Errorf("%w: %w", backends.ErrOutcomeUnknown, err))
	}
	if err := c.domain("SubmitBatch", r.Error); err != nil {
		// The plugin refused the call before any job (not configured).
		return all(err)
	}
	if len(r.Results) != len(specs) {
		return all(fmt.Errorf("plugin %s: SubmitBatch: %w: %w: %d results for %d specs",
			c.label(), backends.ErrOutcomeUnknown, wire.ErrTransport, len(r.Results), len(specs)))
	}
	for i, res := range r.Results {
		out[i].Err = c.domain("SubmitBatch", res.Error)
		if out[i].Err == nil {
			if res.Id == "" {
				out[i].Err = fmt.Errorf("plugin %s: SubmitBatch: %w: %w: job %d has neither an id nor an error",
					c.label(), backends.ErrOutcomeUnknown, wire.ErrTransport, i)
				continue
			}
			out[i].ID = backends.JobID(res.Id)
		}
	}
	return out
}

// SubmitBatch implements the SubmitBatch RPC: the backend's SubmitArrays
// when it submits native arrays (backends.ArraySubmitter, which keeps
// SubmitBatch's contract: the elements of a grid array in the batch go as
// one array job), else its SubmitBatch when it has the capability, else
// one Submit per spec (so a host may call it whatever the plugin
// declared).
func (s *Server) SubmitBatch(ctx context.Context, r *pb.BackendSubmitBatchRequest) (*pb.BackendSubmitBatchReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendSubmitBatchReply{Error: e}, nil
	}
	specs := make([]*backends.JobSpec, len(r.Specs))
	reply := &pb.BackendSubmitBatchReply{Results: make([]*pb.BackendSubmitResult, len(r.Specs))}
	var send []*backends.JobSpec
	var at []int
	for i, ps := range r.Specs {
		specs[i] = specFromProto(ps)
		if specs[i] == nil {
			reply.Results[i] = &pb.BackendSubmitResult{Error: errorToProto(fmt.Errorf("%w: no job spec in the request", backends.ErrInvalidSpec))}
			continue
		}
		send = append(send, specs[i])
		at = append(at, i)
	}
	var res []backends.SubmitResult
	if as, ok := backends.AsArraySubmitter(b); ok {
		res = as.SubmitArrays(ctx, send)
	} else if bs, ok := backends.AsBatchSubmitter(b); ok {
		res = bs.SubmitBatch(ctx, send)
	} else {
		res = make([]backends.SubmitResult, len(send))
		for i, sp := range send {
			res[i].ID, res[i].Err = b.Submit(ctx, sp)
		}
	}
	if len(res) != len(send) {
		return &pb.BackendSubmitBatchReply{Error: errorToProto(fmt.Errorf("%w: %w: %s: SubmitBatch returned %d results for %d specs",
			backends.ErrBadOutput, backends.ErrOutcomeUnknown, b.Name(), len(res), len(send)))}, nil
	}
	for k, i := range at {
		reply.Results[i] = &pb.BackendSubmitResult{Id: string(res[k].ID), Error: errorToProto(res[k].Err)}
		if res[k].Err != nil {
			reply.Results[i].Id = ""
		}
	}
	return reply, nil
}
