package plannerrpc

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
)

// The pass socket is a side channel for one session's passes: a gRPC
// stream message costs ~120 µs here (HTTP/2 framing, flow control, TLS,
// several goroutine hand-offs each way), a length-prefixed message on a
// Unix socket ~30 µs. The plugin opens it in NewSession when the host asks
// (and the plugin's Info says it can); the host authenticates to it with a
// 32-byte token it got in the NewSession reply over the (mTLS) gRPC
// connection, and both ends check the peer's uid (SO_PEERCRED). The
// host's Passes stream, with one bind message, ties the channel to the
// gRPC connection: when the stream ends (the plugin's gRPC server stopped,
// the host dropped the session) the plugin closes the channel.
//
// Frames: a 4-byte big-endian length, then the body. The host sends the
// token (unframed) first, then each pass as a PlannerPassRequest; each
// reply body is one kind byte (replyPlan, replyStatus) and a PlanReply or
// a google.rpc.Status. A body is at most MaxMessage+1 bytes.

const (
	tokenLen    = 32
	replyPlan   = 0
	replyStatus = 1
	// acceptTimeout bounds how long a session's socket waits for the
	// host, and authTimeout how long a connection may take to send the
	// token.
	acceptTimeout = 30 * time.Second
	authTimeout   = 5 * time.Second
	sockBuffer    = 64 << 10
)

var (
	errBadToken = errors.New("plannerrpc: pass socket: wrong token")
	errBadFrame = errors.New("plannerrpc: pass socket: bad frame")
)

// framer reads and writes frames on one connection (not safe for
// concurrent use in either direction).
type framer struct {
	conn net.Conn
	r    *bufio.Reader
	rbuf []byte
	wbuf []byte
}

func newFramer(c net.Conn) *framer {
	return &framer{conn: c, r: bufio.NewReaderSize(c, sockBuffer)}
}

// write sends kind (if >= 0) and m as one frame, in one write.
func (f *framer) write(kind int, m proto.Message) error {
	b := append(f.wbuf[:0], 0, 0, 0, 0)
	if kind >= 0 {
		b = append(b, byte(kind))
	}
	b, err := proto.MarshalOptions{}.MarshalAppend(b, m)
	if err != nil {
		return err
	}
	if len(b)-4 > MaxMessage+1 {
		return fmt.Errorf("%w: %d bytes, more than %d", errBadFrame, len(b)-4, MaxMessage+1)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	f.wbuf = b
	_, err = f.conn.Write(b)
	return err
}

// read returns the next frame's body, valid until the next read.
func (f *framer) read() ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxMessage+1 {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", errBadFrame, n, MaxMessage+1)
	}
	if cap(f.rbuf) < int(n) {
		f.rbuf = make([]byte, n)
	}
	b := f.rbuf[:n]
	if _, err := io.ReadFull(f.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// checkPeer refuses a peer of another uid than this process's.
func checkPeer(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("plannerrpc: pass socket: a %T, not a Unix socket", c)
	}
	uid, err := peerUID(uc)
	if err != nil {
		return fmt.Errorf("plannerrpc: pass socket: peer credentials: %w", err)
	}
	if uid != os.Getuid() {
		return fmt.Errorf("plannerrpc: pass socket: peer uid %d, not %d", uid, os.Getuid())
	}
	return nil
}

// sideServer is the plugin's side of one session's pass socket.
type sideServer struct {
	path  string
	token []byte

	once sync.Once
	done chan struct{} // closed by close
	// ctx is the passes' ctx: close ends it (the host's bind stream
	// ended, as a Passes stream's ctx ends when the host drops it).
	ctx    context.Context
	cancel context.CancelFunc
	dir    string
	ln     *net.UnixListener
	mu     sync.Mutex
	conn   net.Conn // the authenticated connection, once there is one
}

// openSide makes the socket of session id in a new private directory and
// serves it: the host must connect within acceptTimeout.
func (s *server) openSide(id uint64) (*sideServer, error) {
	dir, err := os.MkdirTemp("", "gridsub-pass-") // 0700
	if err != nil {
		return nil, err
	}
	ss := &sideServer{path: filepath.Join(dir, "s"), dir: dir, token: make([]byte, tokenLen), done: make(chan struct{})}
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	if _, err := rand.Read(ss.token); err != nil {
		os.RemoveAll(dir)
		ss.cancel()
		return nil, err
	}
	ss.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: ss.path, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		ss.cancel()
		return nil, err
	}
	ss.ln.SetUnlinkOnClose(true)
	_ = ss.ln.SetDeadline(time.Now().Add(acceptTimeout))
	go s.serveSide(id, ss)
	return ss, nil
}

// close ends the channel: the listener, the connection, the directory.
func (ss *sideServer) close() {
	ss.once.Do(func() {
		close(ss.done)
		ss.cancel()
		ss.ln.Close()
		ss.mu.Lock()
		if ss.conn != nil {
			ss.conn.Close()
		}
		ss.mu.Unlock()
		os.RemoveAll(ss.dir)
	})
}

// accept returns the first connection that authenticates; others (wrong
// token, wrong uid, too slow) are closed and it goes on waiting.
func (ss *sideServer) accept() (net.Conn, error) {
	for {
		c, err := ss.ln.Accept()
		if err != nil {
			return nil, err
		}
		if err := auth(c, ss.token); err != nil {
			c.Close()
			continue
		}
		// One host: the socket and its directory go now, so that a
		// plugin killed, or exiting without closing its sessions (go-plugin
		// exits the process), leaves nothing behind.
		ss.ln.Close()
		os.RemoveAll(ss.dir)
		return c, nil
	}
}

func auth(c net.Conn, token []byte) error {
	if err := checkPeer(c); err != nil {
		return err
	}
	_ = c.SetDeadline(time.Now().Add(authTimeout))
	got := make([]byte, tokenLen)
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(got, token) != 1 {
		return errBadToken
	}
	return c.SetDeadline(time.Time{})
}

// serveSide serves session id's passes on its socket until the host
// closes it, a pass fails (its error is the last reply), a frame is bad,
// or the channel is closed. A pass's ctx ends when the channel is closed
// (the host's bind stream ended: the host dropped the session, e.g. its
// ctx ended mid-pass, or the gRPC connection went).
func (s *server) serveSide(id uint64, ss *sideServer) {
	defer ss.close()
	c, err := ss.accept()
	if err != nil {
		return
	}
	ss.mu.Lock()
	select {
	case <-ss.done:
		ss.mu.Unlock()
		c.Close()
		return
	default:
	}
	ss.conn = c
	ss.mu.Unlock()
	f := newFramer(c)
	for {
		b, err := f.read()
		if err != nil {
			return
		}
		req := &pb.PlannerPassRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			return
		}
		req.Session = id // this socket serves one session
		plan, err := s.pass(ss.ctx, req)
		if err != nil {
			_ = f.write(replyStatus, status.Convert(err).Proto())
			return
		}
		if err := f.write(replyPlan, &pb.PlanReply{Plan: planToProto(plan)}); err != nil {
			return
		}
	}
}

// sideClient is the host's side of a session's pass socket.
type sideClient struct {
	f        *framer
	stop     func() bool // unhooks the plugin's done ctx
	deadline bool        // the connection has a deadline set
}

// dialSide connects to the plugin's socket at path and authenticates.
func dialSide(ctx context.Context, done context.Context, path string, token []byte) (*sideClient, error) {
	if len(token) != tokenLen {
		return nil, fmt.Errorf("plannerrpc: pass socket: a %d-byte token, want %d", len(token), tokenLen)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := checkPeer(c); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := c.Write(token); err != nil {
		c.Close()
		return nil, err
	}
	return &sideClient{f: newFramer(c), stop: context.AfterFunc(done, func() { c.Close() })}, nil
}

func (sc *sideClient) close() {
	sc.stop()
	sc.f.conn.Close()
}

// pass sends req and reads the reply, bounded by ctx. The error is one of:
// a *status.Status error the plugin sent, errBadFrame, or the transport's.
func (sc *sideClient) pass(ctx context.Context, req *pb.PlannerPassRequest) (*pb.PlanReply, error) {
	c := sc.f.conn
	if d, ok := ctx.Deadline(); ok || sc.deadline {
		_ = c.SetDeadline(d)
		sc.deadline = ok
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	err := sc.f.write(-1, req)
	var b []byte
	if err == nil {
		b, err = sc.f.read()
	}
	if !stop() {
		// ctx ended and the connection's deadline may be in the past:
		// the pass fails, as on the stream (the session is dropped).
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: an empty reply", errBadFrame)
	}
	switch b[0] {
	case replyPlan:
		rep := &pb.PlanReply{}
		if err := proto.Unmarshal(b[1:], rep); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadFrame, err)
		}
		return rep, nil
	case replyStatus:
		st := &spb.Status{}
		if err := proto.Unmarshal(b[1:], st); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadFrame, err)
		}
		if codes.Code(st.GetCode()) == codes.OK {
			return nil, fmt.Errorf("%w: an error reply with code OK", errBadFrame)
		}
		return nil, status.ErrorProto(st)
	}
	return nil, fmt.Errorf("%w: reply kind %d", errBadFrame, b[0])
}

// classifySide gives an error of sideClient.pass the identity
// PLUGIN-STYLE.md §5 asks for, as classify does for the stream's.
func (c *Client) classifySide(ctx context.Context, err error) error {
	if _, ok := status.FromError(err); ok {
		return c.classify(ctx, "Passes", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d.Add(-deadlineSkew)) {
			return context.DeadlineExceeded
		}
	}
	if c.done.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: planner %s: Passes: pass socket: %v", ErrPluginExited, c.name, err)
	}
	return &RemoteError{Plugin: c.name, Method: "Passes", Msg: "pass socket: " + err.Error()}
}
