package daemon_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/api/apitest"
	"github.com/gridsub/gridsub/bridge/daemon"
)

// tcpToken is as long as `openssl rand -hex 32` prints.
const tcpToken = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// TestTCPListenerRules: the daemon's TCP listener needs a long token, TLS
// off loopback (or the override), and a usable certificate; a refused
// start leaves no socket behind.
func TestTCPListenerRules(t *testing.T) {
	state, sock := dirs(t)
	cert, key := apitest.SelfSigned(t)
	for _, tc := range []struct {
		name string
		opts daemon.Options
		want []error
		says string
	}{
		{"short token", daemon.Options{Listen: "127.0.0.1:0", Token: "s3cret"}, []error{daemon.ErrOptions, api.ErrShortToken}, "openssl rand -hex 32"},
		{"every interface, plain", daemon.Options{Listen: "0.0.0.0:0", Token: tcpToken}, []error{api.ErrPlaintext}, "broker.insecure_plaintext"}, // refused before it binds
		{"cert without key", daemon.Options{Listen: "127.0.0.1:0", Token: tcpToken, TLSCert: cert}, []error{daemon.ErrOptions, api.ErrTLS}, "key"},
		{"TLS without listen", daemon.Options{TLSCert: cert, TLSKey: key}, []error{daemon.ErrOptions}, "no TCP listen address"},
	} {
		opts := tc.opts
		opts.Spec, opts.StateDir, opts.Socket = testbed(), state, sock
		_, err := daemon.Start(context.Background(), opts)
		for _, w := range tc.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v, want %v", tc.name, err, w)
			}
		}
		if err != nil && !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the token: %v", tc.name, err)
		}
		if _, err := os.Lstat(sock); err == nil {
			t.Errorf("%s: a refused start left a socket at %s", tc.name, sock)
		}
	}
}

// TestTLSDaemon: the daemon serves the API over TLS with
// a certificate made now; the Go client trusts it through the CA file; a
// client holding its headers open is cut off by the daemon's limits.
func TestTLSDaemon(t *testing.T) {
	state, sock := dirs(t)
	cert, key := apitest.SelfSigned(t)
	d := startOpts(t, daemon.Options{StateDir: state, Socket: sock, TimeScale: 600,
		Listen: "127.0.0.1:0", Token: tcpToken, TLSCert: cert, TLSKey: key,
		Limits: api.Limits{ReadHeaderTimeout: 300 * time.Millisecond}})
	_, port, _ := net.SplitHostPort(d.TCPAddr())
	ctls, err := api.ClientTLS(cert)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := api.NewClient("https://127.0.0.1:"+port, tcpToken, api.HTTPClient(ctls, 10*time.Second))
	j, err := c.Submit(ctx, request("tls", 1, time.Minute, time.Minute))
	if err != nil {
		t.Fatalf("submit over TLS: %v", err)
	}
	if got, err := api.NewUnixClient(sock).Job(ctx, j.ID); err != nil || got.Req.Name != "tls" {
		t.Fatalf("the job over the socket: %+v %v", got, err)
	}

	// The unix socket is bounded too: a client that never finishes its
	// headers is disconnected after ReadHeaderTimeout.
	// So is the TLS port: a client that never starts the handshake.
	for _, tc := range []struct{ network, addr, send string }{
		{"unix", sock, "GET /v1/health HTTP/1.1\r\nHost: x\r\n"},
		{"tcp", "127.0.0.1:" + port, ""},
	} {
		conn, err := net.Dial(tc.network, tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		conn.SetDeadline(t0.Add(10 * time.Second))
		io.WriteString(conn, tc.send)
		_, err = io.Copy(io.Discard, bufio.NewReader(conn))
		conn.Close()
		var ne net.Error
		if el := time.Since(t0); (errors.As(err, &ne) && ne.Timeout()) || el > 3*time.Second {
			t.Errorf("%s: a client holding its headers was kept %s (%v)", conn.RemoteAddr(), el, err)
		}
	}
}

// TestTimeScaleBounds: a --time-scale that would stall the simulated clock
// or overflow it is refused before anything starts.
func TestTimeScaleBounds(t *testing.T) {
	state, sock := dirs(t)
	for _, s := range []float64{1e-300, 1e300, math.NaN(), math.Inf(1), 1e5} {
		_, err := daemon.Start(context.Background(), daemon.Options{Spec: testbed(), StateDir: state, Socket: sock, TimeScale: s})
		if !errors.Is(err, daemon.ErrOptions) || !strings.Contains(err.Error(), "time scale") {
			t.Errorf("time scale %v: %v, want ErrOptions", s, err)
		}
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Errorf("a refused start left a socket at %s", sock)
	}
}
