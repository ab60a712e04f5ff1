package backendrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/gridsub/gridsub/backends"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
)

// Factory builds the backend a plugin serves from the host's configuration
// (JSON, plugins.BackendConfig). It is called once, by the first Configure.
type Factory func(ctx context.Context, config []byte) (backends.Backend, error)

// SimClock is implemented by a simulated backend whose virtual clock the
// host drives (the conformance suite's Harness.Wait, a replay).
//
// Contract: AdvanceTo runs the clock forward to until (nothing when until is
// not later than now) and returns the clock's time afterwards.
type SimClock interface {
	AdvanceTo(ctx context.Context, until time.Time) (time.Time, error)
}

// fetchChunk is the size of one FetchOutputs message.
const fetchChunk = 256 << 10

// watchBuffer bounds the changes a Watch holds for a slow host; past it the
// stream ends with ErrUnavailable and the host polls instead.
const watchBuffer = 1 << 16

// Server is the plugin's side: it serves one backend over gRPC. It does not
// recover panics: a backend that panics takes its plugin process down and
// the host restarts it (PLUGIN-STYLE §5).
type Server struct {
	pb.UnimplementedBackendServer
	factory Factory
	version string

	mu sync.Mutex
	b  backends.Backend
}

// NewServer returns a server that builds its backend with f when the host
// configures it. version is the plugin's semver, shown by `gridsub plugins`.
func NewServer(f Factory, version string) *Server {
	return &Server{factory: f, version: version}
}

var errNotConfigured = fmt.Errorf("%w: the plugin has not been configured (Configure must come first)", backends.ErrUnavailable)

func (s *Server) backend() (backends.Backend, *pb.BackendError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b == nil {
		return nil, errorToProto(errNotConfigured)
	}
	return s.b, nil
}

func unsupported(b backends.Backend, what string) *pb.BackendError {
	return errorToProto(fmt.Errorf("%w: %s: %s", backends.ErrUnsupported, b.Name(), what))
}

// Configure implements the Configure RPC.
func (s *Server) Configure(ctx context.Context, r *pb.BackendConfigureRequest) (*pb.BackendHello, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b == nil {
		b, err := s.factory(ctx, r.ConfigJson)
		if err != nil {
			return &pb.BackendHello{Error: errorToProto(err)}, nil
		}
		s.b = b
	}
	_, clock := s.b.(SimClock)
	kind := ""
	if k, ok := s.b.(interface{ Kind() string }); ok {
		kind = k.Kind()
	}
	return &pb.BackendHello{Name: s.b.Name(), Kind: kind, Version: s.version,
		Capabilities: capsToProto(backends.CapabilitiesOf(s.b), clock)}, nil
}

// Info implements the Info RPC.
func (s *Server) Info(ctx context.Context, _ *pb.BackendInfoRequest) (*pb.BackendInfoReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendInfoReply{Error: e}, nil
	}
	info, err := b.Info(ctx)
	if err != nil {
		return &pb.BackendInfoReply{Error: errorToProto(err)}, nil
	}
	return &pb.BackendInfoReply{Info: infoToProto(info)}, nil
}

// Submit implements the Submit RPC.
func (s *Server) Submit(ctx context.Context, r *pb.BackendSubmitRequest) (*pb.BackendSubmitReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendSubmitReply{Error: e}, nil
	}
	spec := specFromProto(r.Spec)
	if spec == nil {
		return &pb.BackendSubmitReply{Error: errorToProto(fmt.Errorf("%w: no job spec in the request", backends.ErrInvalidSpec))}, nil
	}
	id, err := b.Submit(ctx, spec)
	return &pb.BackendSubmitReply{Id: string(id), Error: errorToProto(err)}, nil
}

// Status implements the Status RPC.
func (s *Server) Status(ctx context.Context, r *pb.BackendStatusRequest) (*pb.BackendStatusReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendStatusReply{Error: e}, nil
	}
	ids := make([]backends.JobID, len(r.Ids))
	for i, id := range r.Ids {
		ids[i] = backends.JobID(id)
	}
	st, err := b.Status(ctx, ids)
	if err != nil {
		return &pb.BackendStatusReply{Error: errorToProto(err)}, nil
	}
	return &pb.BackendStatusReply{Statuses: statusesToProto(st)}, nil
}

// Cancel implements the Cancel RPC.
func (s *Server) Cancel(ctx context.Context, r *pb.BackendCancelRequest) (*pb.BackendCancelReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendCancelReply{Error: e}, nil
	}
	return &pb.BackendCancelReply{Error: errorToProto(b.Cancel(ctx, backends.JobID(r.Id)))}, nil
}

// FindByGridID implements the FindByGridID RPC.
func (s *Server) FindByGridID(ctx context.Context, r *pb.BackendFindRequest) (*pb.BackendFindReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendFindReply{Error: e}, nil
	}
	f, ok := backends.AsFinder(b)
	if !ok {
		return &pb.BackendFindReply{Error: unsupported(b, "finding jobs by grid id")}, nil
	}
	st, err := f.FindByGridID(ctx, r.GridId)
	if err != nil {
		return &pb.BackendFindReply{Error: errorToProto(err)}, nil
	}
	return &pb.BackendFindReply{Statuses: statusesToProto(st)}, nil
}

// FetchOutputs implements the FetchOutputs RPC: the backend fetches into a
// private temporary directory, and every file it reports is streamed from
// there (opened through an os.Root, so a symbolic link cannot make the
// plugin send a file from outside it). Files fetched before an error are
// still sent, then the error.
func (s *Server) FetchOutputs(r *pb.BackendFetchRequest, st pb.Backend_FetchOutputsServer) error {
	b, e := s.backend()
	if e != nil {
		return st.Send(&pb.BackendFetchChunk{Error: e})
	}
	f, ok := backends.AsFetcher(b)
	if !ok {
		return st.Send(&pb.BackendFetchChunk{Error: unsupported(b, "fetching outputs")})
	}
	tmp, err := os.MkdirTemp("", "gridsub-fetch-")
	if err != nil {
		return st.Send(&pb.BackendFetchChunk{Error: errorToProto(fmt.Errorf("%s: fetch: %w", b.Name(), err))})
	}
	defer os.RemoveAll(tmp)
	paths, ferr := f.FetchOutputs(st.Context(), backends.JobID(r.Id), specFromProto(r.Spec), tmp)
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return st.Send(&pb.BackendFetchChunk{Error: errorToProto(err)})
	}
	defer root.Close()
	for _, p := range paths {
		rel, err := filepath.Rel(tmp, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
			ferr = errors.Join(ferr, fmt.Errorf("%w: %s: fetched path %q is outside the fetch directory", backends.ErrBadOutput, b.Name(), p))
			break
		}
		if err := sendFile(st, root, rel); err != nil {
			if st.Context().Err() != nil {
				return err
			}
			ferr = errors.Join(ferr, fmt.Errorf("%s: sending %s: %w", b.Name(), rel, err))
			break
		}
	}
	if ferr != nil {
		return st.Send(&pb.BackendFetchChunk{Error: errorToProto(ferr)})
	}
	return nil
}

func sendFile(st pb.Backend_FetchOutputsServer, root *os.Root, rel string) error {
	f, err := root.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", rel)
	}
	buf := make([]byte, fetchChunk)
	first := true
	for {
		n, rerr := io.ReadFull(f, buf)
		if n > 0 || first {
			if err := st.Send(&pb.BackendFetchChunk{Path: filepath.ToSlash(rel), Mode: uint32(fi.Mode().Perm()), Data: buf[:n], First: first}); err != nil {
				return err
			}
			first = false
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// CreateReservation implements the CreateReservation RPC.
func (s *Server) CreateReservation(ctx context.Context, r *pb.BackendCreateReservationRequest) (*pb.BackendCreateReservationReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendCreateReservationReply{Error: e}, nil
	}
	rv, ok := backends.AsReserver(b)
	if !ok {
		return &pb.BackendCreateReservationReply{Error: unsupported(b, "advance reservations")}, nil
	}
	id, err := rv.CreateReservation(ctx, resvSpecFromProto(r.Spec))
	return &pb.BackendCreateReservationReply{Id: string(id), Error: errorToProto(err)}, nil
}

// ShowReservation implements the ShowReservation RPC.
func (s *Server) ShowReservation(ctx context.Context, r *pb.BackendShowReservationRequest) (*pb.BackendShowReservationReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendShowReservationReply{Error: e}, nil
	}
	rv, ok := backends.AsReserver(b)
	if !ok {
		return &pb.BackendShowReservationReply{Error: unsupported(b, "advance reservations")}, nil
	}
	res, err := rv.ShowReservation(ctx, backends.ResvID(r.Id))
	if err != nil {
		return &pb.BackendShowReservationReply{Error: errorToProto(err)}, nil
	}
	return &pb.BackendShowReservationReply{Reservation: resvToProto(res)}, nil
}

// DeleteReservation implements the DeleteReservation RPC.
func (s *Server) DeleteReservation(ctx context.Context, r *pb.BackendDeleteReservationRequest) (*pb.BackendDeleteReservationReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendDeleteReservationReply{Error: e}, nil
	}
	rv, ok := backends.AsReserver(b)
	if !ok {
		return &pb.BackendDeleteReservationReply{Error: unsupported(b, "advance reservations")}, nil
	}
	return &pb.BackendDeleteReservationReply{Error: errorToProto(rv.DeleteReservation(ctx, backends.ResvID(r.Id)))}, nil
}

// Watch implements the Watch RPC: the backend's changes are queued (at most
// watchBuffer) and sent in order until the host ends the stream.
func (s *Server) Watch(_ *pb.BackendWatchRequest, st pb.Backend_WatchServer) error {
	b, e := s.backend()
	if e != nil {
		return st.Send(&pb.BackendWatchEvent{Error: e})
	}
	w, ok := backends.AsWatcher(b)
	if !ok {
		return st.Send(&pb.BackendWatchEvent{Error: unsupported(b, "pushed status changes")})
	}
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	ch := make(chan backends.JobStatus, watchBuffer)
	overflow := false
	var omu sync.Mutex
	errc := make(chan error, 1)
	go func() {
		errc <- w.Watch(ctx, func(js backends.JobStatus) {
			select {
			case ch <- js:
			default:
				omu.Lock()
				overflow = true
				omu.Unlock()
				cancel()
			}
		})
	}()
	for {
		select {
		case js := <-ch:
			if err := st.Send(&pb.BackendWatchEvent{Status: statusToProto(&js)}); err != nil {
				return err
			}
		case err := <-errc:
			for len(ch) > 0 {
				js := <-ch
				if serr := st.Send(&pb.BackendWatchEvent{Status: statusToProto(&js)}); serr != nil {
					return serr
				}
			}
			if cerr := st.Context().Err(); cerr != nil {
				// The host's deadline or cancel: say which, so the host
				// does not read a clean end of the stream (it may see
				// this before its own ctx is done).
				return status.FromContextError(cerr).Err()
			}
			omu.Lock()
			if overflow {
				err = fmt.Errorf("%w: %s: the host fell %d changes behind; poll Status and watch again", backends.ErrUnavailable, b.Name(), watchBuffer)
			}
			omu.Unlock()
			if err == nil {
				err = fmt.Errorf("%w: %s stopped reporting changes", backends.ErrUnavailable, b.Name())
			}
			return st.Send(&pb.BackendWatchEvent{Error: errorToProto(err)})
		}
	}
}

// Ping implements the Ping RPC: health, and the values the client caches
// for LinkEstimate and ConnErr.
func (s *Server) Ping(context.Context, *pb.BackendPingRequest) (*pb.BackendPingReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendPingReply{ConnError: e}, nil
	}
	out := &pb.BackendPingReply{}
	if c, ok := backends.AsConnectivity(b); ok {
		out.ConnError = errorToProto(c.ConnErr())
	}
	if l, ok := backends.AsLinkEstimator(b); ok {
		spb, lat, ok := l.LinkEstimate()
		out.LinkOk, out.LinkSecPerByte, out.LinkLatencyNanos = ok, spb, int64(lat)
	}
	return out, nil
}

// Clock implements the Clock RPC.
func (s *Server) Clock(ctx context.Context, r *pb.BackendClockRequest) (*pb.BackendClockReply, error) {
	b, e := s.backend()
	if e != nil {
		return &pb.BackendClockReply{Error: e}, nil
	}
	c, ok := b.(SimClock)
	if !ok {
		return &pb.BackendClockReply{Error: unsupported(b, "a virtual clock")}, nil
	}
	now, err := c.AdvanceTo(ctx, wire.TimeFromWire(r.UntilUnixNano))
	return &pb.BackendClockReply{NowUnixNano: wire.TimeToWire(now), Error: errorToProto(err)}, nil
}
