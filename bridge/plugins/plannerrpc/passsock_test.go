package plannerrpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/gridsub/gridsub/bridge/plugins"
	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/policy"
)

// sideOf is the pass socket of a host session (nil: the Passes stream).
func sideOf(t *testing.T, s policy.Session) *sideClient {
	t.Helper()
	ss, ok := s.(*session)
	if !ok {
		t.Fatalf("a %T, not a *session", s)
	}
	return ss.side
}

// TestPassSocketNegotiated: a plugin that offers the pass socket gets the
// passes on it, one that does not (as a plugin built before it) on the
// Passes stream; both plan exactly what the planner's own session plans.
func TestPassSocketNegotiated(t *testing.T) {
	if !passSocketSupported {
		t.Skip("no pass socket on this OS")
	}
	const name = "greedy-conservative"
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			c, _ := goplugin.TestPluginGRPCConn(t, false, goplugin.PluginSet{
				plugins.KindPlanner: &GRPCPlugin{Impl: builtin(t, name), StreamPasses: stream}})
			t.Cleanup(func() { c.Close() })
			raw, err := c.Dispense(plugins.KindPlanner)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(5, 5))
			s := randSnapshot(r, 4, 30)
			s.Quiet = true
			got, err := raw.(policy.Incremental).NewSession(s)
			if err != nil {
				t.Fatal(err)
			}
			if (sideOf(t, got) == nil) != stream {
				t.Fatalf("pass socket %v with StreamPasses %v", sideOf(t, got) != nil, stream)
			}
			want, _ := builtin(t, name).(policy.Incremental).NewSession(s)
			passes, _ := drive(t, name, r, s, want, got, 80, nil)
			if passes == 0 {
				t.Fatal("no passes")
			}
		})
	}
}

// openRaw opens a session with a pass socket on srv and returns the reply.
func openRaw(t *testing.T, srv *server) *pb.NewPlannerSessionReply {
	t.Helper()
	s := &policy.Snapshot{Now: t0, Quiet: true, Sites: []policy.Site{{Name: "a", Nodes: 4, Free: 4, H: 1}}}
	rep, err := srv.NewSession(context.Background(), &pb.NewPlannerSessionRequest{Snapshot: snapshotToProto(s), PassSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GetPassSocket() == "" || len(rep.GetPassToken()) != tokenLen {
		t.Fatalf("no pass socket in %v", rep)
	}
	return rep
}

// closedByPeer fails unless the peer closes c (within 5 s).
func closedByPeer(t *testing.T, what string, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 16)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: read %d bytes, %v; want the plugin to close the connection", what, n, err)
	}
}

// TestPassSocketAuth: the socket's directory is private; a peer with the
// wrong token (or a short one) is disconnected and the socket waits on;
// the host with the right token is served; after it nobody connects.
func TestPassSocketAuth(t *testing.T) {
	if !passSocketSupported {
		t.Skip("no pass socket on this OS")
	}
	srv := newServer(builtin(t, "greedy-easy"))
	rep := openRaw(t, srv)
	st, err := os.Stat(filepath.Dir(rep.GetPassSocket()))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory mode %v, want 0700", st.Mode().Perm())
	}
	for _, bad := range [][]byte{bytes.Repeat([]byte{'x'}, tokenLen), rep.GetPassToken()[:tokenLen-1]} {
		c, err := net.Dial("unix", rep.GetPassSocket())
		if err != nil {
			t.Fatal(err)
		}
		tok := append([]byte(nil), bad...)
		if len(tok) < tokenLen {
			tok = append(tok, rep.GetPassToken()[tokenLen-1]^1) // right length, last byte wrong
		}
		if _, err := c.Write(tok); err != nil {
			t.Fatal(err)
		}
		closedByPeer(t, "wrong token", c)
		c.Close()
	}
	done, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := dialSide(context.Background(), done, rep.GetPassSocket(), rep.GetPassToken()[:8]); err == nil {
		t.Fatal("dialSide took an 8-byte token")
	}
	sc, err := dialSide(context.Background(), done, rep.GetPassSocket(), rep.GetPassToken())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.close()
	req := &pb.PlannerPassRequest{Submits: jobsToProto([]policy.Job{{ID: "j1", Width: 2, Estimate: time.Hour, Submit: t0, Origin: -1}})}
	req.NowSec, req.NowNanos = timeToWire(t0.Add(time.Minute))
	pr, err := sc.pass(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planFromProto(pr.GetPlan())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Decisions) != 1 || plan.Decisions[0].Job != "j1" {
		t.Fatalf("decisions %+v, want j1 started", plan.Decisions)
	}
	if c, err := net.Dial("unix", rep.GetPassSocket()); err == nil {
		c.Close()
		t.Fatal("the socket still accepts after the host connected")
	}
	if _, err := os.Stat(filepath.Dir(rep.GetPassSocket())); !os.IsNotExist(err) {
		t.Fatalf("the socket's directory outlived the host's connection: %v", err)
	}
	// The plugin's error comes back as its status; the socket then closes.
	bad := &pb.PlannerPassRequest{Holds: []*pb.PlannerHoldChange{{Release: true, Site: 0, Nodes: 2}}}
	bad.NowSec, bad.NowNanos = timeToWire(t0.Add(2 * time.Minute))
	c := &Client{name: "t", done: done}
	if _, err := sc.pass(context.Background(), bad); err == nil {
		t.Fatal("a bad release passed")
	} else if re := new(RemoteError); !errors.As(c.classifySide(context.Background(), err), &re) {
		t.Fatalf("bad release: %v, want a RemoteError", err)
	}
	if _, err := sc.pass(context.Background(), req); !errors.Is(c.classifySide(context.Background(), err), ErrPluginExited) {
		t.Fatalf("after a failed pass: %v, want the socket closed", err)
	}
	if _, err := os.Stat(filepath.Dir(rep.GetPassSocket())); !os.IsNotExist(err) {
		t.Fatalf("the socket's directory outlived its channel: %v", err)
	}
}

// TestPassSocketBadFrames: a host that sends an oversize frame or garbage
// is disconnected and its session dropped; a plugin that replies garbage
// gives a RemoteError, one that goes away ErrPluginExited.
func TestPassSocketBadFrames(t *testing.T) {
	if !passSocketSupported {
		t.Skip("no pass socket on this OS")
	}
	for _, frame := range [][]byte{
		binary.BigEndian.AppendUint32(nil, MaxMessage+2),                // oversize
		append(binary.BigEndian.AppendUint32(nil, 3), 0xff, 0xff, 0xff), // not a PlannerPassRequest
	} {
		srv := newServer(builtin(t, "greedy-easy"))
		rep := openRaw(t, srv)
		c, err := net.Dial("unix", rep.GetPassSocket())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(append(append([]byte(nil), rep.GetPassToken()...), frame...)); err != nil {
			t.Fatal(err)
		}
		closedByPeer(t, fmt.Sprintf("frame %x", frame), c)
		c.Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, err := srv.pass(context.Background(), &pb.PlannerPassRequest{Session: rep.GetSession(), NowSec: 1}); err != nil {
				break // dropped: NotFound
			}
			if time.Now().After(deadline) {
				t.Fatal("the session survived a bad frame")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// The host's side against a plugin that replies garbage.
	done, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := &Client{name: "t", done: done}
	for _, reply := range [][]byte{
		{0, 0, 0, 0},                // empty
		{0, 0, 0, 2, 7, 0},          // unknown kind
		{0, 0, 0, 3, 0, 0xff, 0xff}, // not a PlanReply
		{0xff, 0xff, 0xff, 0xff},    // oversize
		{0, 0, 0, 3, 1, 0x08, 0x00}, // a status with code OK
	} {
		h, p := net.Pipe()
		go func() {
			f := newFramer(p)
			if _, err := f.read(); err == nil {
				p.Write(reply)
			}
			p.Close()
		}()
		sc := &sideClient{f: newFramer(h), stop: func() bool { return true }}
		_, err := sc.pass(context.Background(), &pb.PlannerPassRequest{})
		var re *RemoteError
		if !errors.As(cl.classifySide(context.Background(), err), &re) {
			t.Fatalf("reply %x: %v, want a RemoteError", reply, err)
		}
		h.Close()
	}
}

// TestPassSocketPluginDies: a plugin process killed mid-pass gives
// ErrPluginExited on the pass socket, at once, not at a timeout.
func TestPassSocketPluginDies(t *testing.T) {
	if !passSocketSupported {
		t.Skip("no pass socket on this OS")
	}
	p := load(t, "-hang-after", "3", "greedy-easy")
	s := &policy.Snapshot{Now: t0, Quiet: true, Sites: []policy.Site{{Name: "a", Nodes: 4, Free: 4, H: 1}}}
	ss, err := p.Planner().(policy.Incremental).NewSession(s)
	if err != nil {
		t.Fatal(err)
	}
	if sideOf(t, ss) == nil {
		t.Fatal("the plugin process gave no pass socket")
	}
	now := t0
	for range 3 {
		now = now.Add(time.Minute)
		if _, err := ss.Plan(context.Background(), now); err != nil {
			t.Fatal(err)
		}
	}
	pid := p.Pid()
	time.AfterFunc(200*time.Millisecond, func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = ss.Plan(ctx, now.Add(time.Minute))
	if !errors.Is(err, ErrPluginExited) {
		t.Fatalf("pass while the plugin is killed: %v, want ErrPluginExited", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the pass took %v to notice", d)
	}
}
