package policyrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// maxBooks bounds the books one admission plugin keeps: a host that leaks
// them gets a clear error instead of a plugin that grows without bound.
const maxBooks = 4096

// AdmissionClient is the host's side of an admission plugin: a
// policy.Admission whose books live in the plugin.
type AdmissionClient struct {
	*base
	rpc pb.AdmissionClient
}

var _ policy.Admission = (*AdmissionClient)(nil)

func newAdmissionClient(done context.Context, cc *grpc.ClientConn, timeout time.Duration) (*AdmissionClient, error) {
	rpc := pb.NewAdmissionClient(cc)
	b, err := dial(done, plugins.KindAdmission, timeout, func(ctx context.Context) (*pb.PolicyInfo, error) {
		return rpc.Info(ctx, &pb.PolicyInfoRequest{})
	})
	if err != nil {
		return nil, err
	}
	return &AdmissionClient{base: b, rpc: rpc}, nil
}

// NewBook implements policy.Admission: one NewBook RPC; the book lives in
// the plugin until Close (*Book). When the call fails the book is broken:
// every method answers its safe value (Admit refuses, Bind fails) and Err
// says why.
func (c *AdmissionClient) NewBook(res []policy.ResvResource, seed uint64) policy.ReservationBook {
	req := &pb.NewBookRequest{Seed: seed}
	for _, r := range res {
		req.Resources = append(req.Resources, resourceToProto(r))
	}
	var rep *pb.NewBookReply
	err := c.call("NewBook", func(ctx context.Context) (err error) {
		rep, err = c.rpc.NewBook(ctx, req)
		return err
	})
	if err == nil {
		err = c.remote("NewBook", rep.GetError())
	}
	if err == nil && rep.GetBook() == 0 {
		err = c.bad("NewBook", errors.New("book id 0"))
	}
	c.note(err)
	return &Book{c: c, id: rep.GetBook(), broken: err, booked: map[string]time.Time{}}
}

// Book is a ReservationBook kept by an admission plugin. Its methods
// without an error result answer a safe value when the call fails (Admit:
// Unresolvable with the failure as its reason; Remove, AddResource: no
// change; Reservations, SetCapacity, FailResource: nil) and keep the
// failure for Err. Not safe for concurrent use (as every book).
//
// Book answers policy.BookedStart from what the plugin's replies carried,
// without a call of its own: the start Admit's reply booked (when the
// plugin's book has the capability), then the start of a successful Bind;
// a reservation removed or dropped is forgotten. For a plugin book without
// the capability it answers ok false, as the missing capability would.
type Book struct {
	c      *AdmissionClient
	id     uint64
	broken error // NewBook failed
	last   error
	booked map[string]time.Time
}

var (
	_ policy.ReservationBook = (*Book)(nil)
	_ policy.BookedStart     = (*Book)(nil)
)

// Booked implements policy.BookedStart.
func (b *Book) Booked(id string) (time.Time, bool) {
	t, ok := b.booked[id]
	return t, ok
}

func (b *Book) forget(ids []string) {
	for _, id := range ids {
		delete(b.booked, id)
	}
}

// Err is the failure of the book's last call (nil after a success).
func (b *Book) Err() error { return b.last }

// Close frees the book in the plugin; the book is of no more use.
func (b *Book) Close() error {
	if b.broken != nil || b.id == 0 {
		return nil
	}
	id := b.id
	b.id, b.broken = 0, errors.New("book closed")
	var rep *pb.BookReply
	err := b.c.call("CloseBook", func(ctx context.Context) (err error) {
		rep, err = b.c.rpc.CloseBook(ctx, &pb.BookRequest{Book: id})
		return err
	})
	if err != nil {
		return err
	}
	return b.c.remote("CloseBook", rep.GetError())
}

// do runs one book call and decodes its error; it records the outcome.
func (b *Book) do(method string, f func(context.Context) (*pb.PolicyError, error)) error {
	if b.broken != nil {
		b.last = fmt.Errorf("admission plugin %s: %s: the book is unusable: %w", b.c.name, method, b.broken)
		return b.last
	}
	var perr *pb.PolicyError
	err := b.c.call(method, func(ctx context.Context) (err error) {
		perr, err = f(ctx)
		return err
	})
	if err == nil {
		err = b.c.remote(method, perr)
	}
	b.last = err
	return err
}

// Admit implements policy.ReservationBook.
func (b *Book) Admit(q policy.ResvRequest, now time.Time, running []policy.ResvRunning) policy.Status {
	req := &pb.AdmitRequest{Book: b.id, Request: resvRequestToProto(q), Running: runningToProto(running)}
	req.NowSec, req.NowNanos = tw(now)
	var rep *pb.AdmitReply
	err := b.do("Admit", func(ctx context.Context) (_ *pb.PolicyError, err error) {
		rep, err = b.c.rpc.Admit(ctx, req)
		return rep.GetError(), err
	})
	var st policy.Status
	if err == nil {
		if st, err = plannerrpc.StatusFromProto(rep.GetStatus()); err != nil {
			err = b.c.bad("Admit", err)
			b.last = err
		}
	}
	if err != nil {
		return policy.NewStatus(policy.Unresolvable, b.c.name, "admission plugin failed: "+err.Error())
	}
	if st.Code == policy.Success && rep.GetBooked() && b.booked != nil {
		b.booked[q.ID] = tf(rep.GetBookedSec(), rep.GetBookedNanos())
	}
	return st
}

// Bind implements policy.ReservationBook; its errors keep their identity
// (policy.ErrResv*).
func (b *Book) Bind(id string, now time.Time, running []policy.ResvRunning) (policy.ResvBinding, error) {
	req := &pb.BindRequest{Book: b.id, Id: id, Running: runningToProto(running)}
	req.NowSec, req.NowNanos = tw(now)
	var rep *pb.BindReply
	if err := b.do("Bind", func(ctx context.Context) (_ *pb.PolicyError, err error) {
		rep, err = b.c.rpc.Bind(ctx, req)
		return rep.GetError(), err
	}); err != nil {
		return policy.ResvBinding{}, err
	}
	rb := bindingFromProto(rep.GetBinding())
	if b.booked != nil {
		b.booked[id] = rb.Start
	}
	return rb, nil
}

// Remove implements policy.ReservationBook.
func (b *Book) Remove(id string) {
	if b.do("Remove", func(ctx context.Context) (*pb.PolicyError, error) {
		rep, err := b.c.rpc.Remove(ctx, &pb.RemoveRequest{Book: b.id, Id: id})
		return rep.GetError(), err
	}) == nil {
		b.forget([]string{id})
	}
}

// Reservations implements policy.ReservationBook.
func (b *Book) Reservations() []string {
	var rep *pb.ReservationsReply
	if b.do("Reservations", func(ctx context.Context) (_ *pb.PolicyError, err error) {
		rep, err = b.c.rpc.Reservations(ctx, &pb.BookRequest{Book: b.id})
		return rep.GetError(), err
	}) != nil {
		return nil
	}
	return rep.GetIds()
}

// AddResource implements policy.ReservationBook.
func (b *Book) AddResource(r policy.ResvResource) {
	_ = b.do("AddResource", func(ctx context.Context) (*pb.PolicyError, error) {
		rep, err := b.c.rpc.AddResource(ctx, &pb.AddResourceRequest{Book: b.id, Resource: resourceToProto(r)})
		return rep.GetError(), err
	})
}

// SetCapacity implements policy.ReservationBook.
func (b *Book) SetCapacity(name string, capacity int) (dropped []string) {
	var rep *pb.DroppedReply
	if b.do("SetCapacity", func(ctx context.Context) (_ *pb.PolicyError, err error) {
		rep, err = b.c.rpc.SetCapacity(ctx, &pb.SetCapacityRequest{Book: b.id, Name: name, Capacity: int64(capacity)})
		return rep.GetError(), err
	}) != nil {
		return nil
	}
	b.forget(rep.GetDropped())
	return rep.GetDropped()
}

// FailResource implements policy.ReservationBook.
func (b *Book) FailResource(name string) (dropped []string) {
	var rep *pb.DroppedReply
	if b.do("FailResource", func(ctx context.Context) (_ *pb.PolicyError, err error) {
		rep, err = b.c.rpc.FailResource(ctx, &pb.FailResourceRequest{Book: b.id, Name: name})
		return rep.GetError(), err
	}) != nil {
		return nil
	}
	b.forget(rep.GetDropped())
	return rep.GetDropped()
}

// admissionServer is the plugin's side: it keeps the books by id, each
// with its own lock (a book is not safe for concurrent use).
type admissionServer struct {
	pb.UnimplementedAdmissionServer
	impl    policy.Admission
	version string

	mu    sync.Mutex
	next  uint64
	books map[uint64]*serverBook
}

type serverBook struct {
	mu sync.Mutex
	b  policy.ReservationBook
}

func registerAdmission(s *grpc.Server, impl policy.Admission, version string) {
	pb.RegisterAdmissionServer(s, &admissionServer{impl: impl, version: version, books: map[uint64]*serverBook{}})
}

func (s *admissionServer) Info(context.Context, *pb.PolicyInfoRequest) (*pb.PolicyInfo, error) {
	return info(plugins.KindAdmission, s.impl.Name(), s.version), nil
}

func (s *admissionServer) NewBook(_ context.Context, req *pb.NewBookRequest) (*pb.NewBookReply, error) {
	var res []policy.ResvResource
	for _, r := range req.GetResources() {
		res = append(res, resourceFromProto(r))
	}
	b := s.impl.NewBook(res, req.GetSeed())
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.books) >= maxBooks {
		return nil, status.Errorf(codes.ResourceExhausted, "%d books open; close some (CloseBook) first", len(s.books))
	}
	s.next++
	s.books[s.next] = &serverBook{b: b}
	return &pb.NewBookReply{Book: s.next}, nil
}

func (s *admissionServer) CloseBook(_ context.Context, req *pb.BookRequest) (*pb.BookReply, error) {
	s.mu.Lock()
	delete(s.books, req.GetBook())
	s.mu.Unlock()
	return &pb.BookReply{}, nil
}

// with runs f on book id under its lock; an unknown id is NotFound (the
// plugin restarted, or the host closed it).
func (s *admissionServer) with(id uint64, f func(policy.ReservationBook)) error {
	s.mu.Lock()
	b := s.books[id]
	s.mu.Unlock()
	if b == nil {
		return status.Errorf(codes.NotFound, "no book %d", id)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b.b)
	return nil
}

func (s *admissionServer) Admit(_ context.Context, req *pb.AdmitRequest) (*pb.AdmitReply, error) {
	var (
		st     policy.Status
		at     time.Time
		booked bool
	)
	q := resvRequestFromProto(req.GetRequest())
	err := s.with(req.GetBook(), func(b policy.ReservationBook) {
		st = b.Admit(q, tf(req.GetNowSec(), req.GetNowNanos()), runningFromProto(req.GetRunning()))
		if bs, ok := b.(policy.BookedStart); ok && st.Code == policy.Success {
			at, booked = bs.Booked(q.ID)
		}
	})
	if err != nil {
		return nil, err
	}
	rep := &pb.AdmitReply{Status: plannerrpc.StatusToProto(st), Booked: booked}
	if booked {
		rep.BookedSec, rep.BookedNanos = tw(at)
	}
	return rep, nil
}

func (s *admissionServer) Bind(_ context.Context, req *pb.BindRequest) (*pb.BindReply, error) {
	var rb policy.ResvBinding
	var berr error
	if err := s.with(req.GetBook(), func(b policy.ReservationBook) {
		rb, berr = b.Bind(req.GetId(), tf(req.GetNowSec(), req.GetNowNanos()), runningFromProto(req.GetRunning()))
	}); err != nil {
		return nil, err
	}
	if berr != nil {
		return &pb.BindReply{Error: errorToProto(berr)}, nil
	}
	return &pb.BindReply{Binding: bindingToProto(rb)}, nil
}

func (s *admissionServer) Remove(_ context.Context, req *pb.RemoveRequest) (*pb.BookReply, error) {
	if err := s.with(req.GetBook(), func(b policy.ReservationBook) { b.Remove(req.GetId()) }); err != nil {
		return nil, err
	}
	return &pb.BookReply{}, nil
}

func (s *admissionServer) Reservations(_ context.Context, req *pb.BookRequest) (*pb.ReservationsReply, error) {
	var ids []string
	if err := s.with(req.GetBook(), func(b policy.ReservationBook) { ids = b.Reservations() }); err != nil {
		return nil, err
	}
	return &pb.ReservationsReply{Ids: ids}, nil
}

func (s *admissionServer) AddResource(_ context.Context, req *pb.AddResourceRequest) (*pb.BookReply, error) {
	if err := s.with(req.GetBook(), func(b policy.ReservationBook) { b.AddResource(resourceFromProto(req.GetResource())) }); err != nil {
		return nil, err
	}
	return &pb.BookReply{}, nil
}

func (s *admissionServer) SetCapacity(_ context.Context, req *pb.SetCapacityRequest) (*pb.DroppedReply, error) {
	var d []string
	if err := s.with(req.GetBook(), func(b policy.ReservationBook) { d = b.SetCapacity(req.GetName(), int(req.GetCapacity())) }); err != nil {
		return nil, err
	}
	return &pb.DroppedReply{Dropped: d}, nil
}

func (s *admissionServer) FailResource(_ context.Context, req *pb.FailResourceRequest) (*pb.DroppedReply, error) {
	var d []string
	if err := s.with(req.GetBook(), func(b policy.ReservationBook) { d = b.FailResource(req.GetName()) }); err != nil {
		return nil, err
	}
	return &pb.DroppedReply{Dropped: d}, nil
}

func resourceToProto(r policy.ResvResource) *pb.ResvResource {
	return &pb.ResvResource{Name: r.Name, Capacity: int64(r.Capacity), Level: int64(r.Level), Cost: r.Cost}
}

func resourceFromProto(r *pb.ResvResource) policy.ResvResource {
	return policy.ResvResource{Name: r.GetName(), Capacity: int(r.GetCapacity()), Level: int(r.GetLevel()), Cost: r.GetCost()}
}

func resvRequestToProto(q policy.ResvRequest) *pb.ResvRequest {
	out := &pb.ResvRequest{Id: q.ID, DurNs: int64(q.Dur), Width: int64(q.Width), Demand: int64(q.Demand), Allowed: q.Allowed}
	out.EtSec, out.EtNanos = tw(q.ET)
	out.LtSec, out.LtNanos = tw(q.LT)
	return out
}

func resvRequestFromProto(q *pb.ResvRequest) policy.ResvRequest {
	return policy.ResvRequest{ID: q.GetId(), ET: tf(q.GetEtSec(), q.GetEtNanos()), LT: tf(q.GetLtSec(), q.GetLtNanos()),
		Dur: time.Duration(q.GetDurNs()), Width: int(q.GetWidth()), Demand: int(q.GetDemand()), Allowed: q.GetAllowed()}
}

func runningToProto(rs []policy.ResvRunning) []*pb.ResvRunning {
	var out []*pb.ResvRunning
	for _, r := range rs {
		out = append(out, &pb.ResvRunning{Resource: r.Resource, Job: r.Job, Nodes: int64(r.Nodes), ExpectedNs: int64(r.Expected), ElapsedNs: int64(r.Elapsed)})
	}
	return out
}

func runningFromProto(rs []*pb.ResvRunning) []policy.ResvRunning {
	var out []policy.ResvRunning
	for _, r := range rs {
		out = append(out, policy.ResvRunning{Resource: r.GetResource(), Job: r.GetJob(), Nodes: int(r.GetNodes()),
			Expected: time.Duration(r.GetExpectedNs()), Elapsed: time.Duration(r.GetElapsedNs())})
	}
	return out
}

func bindingToProto(b policy.ResvBinding) *pb.ResvBinding {
	out := &pb.ResvBinding{Resource: b.Resource, Preempt: b.Preempt, Cost: b.Cost, Reason: b.Reason}
	out.StartSec, out.StartNanos = tw(b.Start)
	return out
}

func bindingFromProto(b *pb.ResvBinding) policy.ResvBinding {
	return policy.ResvBinding{Resource: b.GetResource(), Start: tf(b.GetStartSec(), b.GetStartNanos()), Preempt: b.GetPreempt(), Cost: b.GetCost(), Reason: b.GetReason()}
}
