package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
)

// refusedConn opens a connection, sends one request without a token and
// reads its 401; it returns the connection (left open by the client) and
// the answer's headers.
func refusedConn(t *testing.T, addr string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/sites HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return &bufConn{c, br}, resp
}

type bufConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.br.Read(b) }

// TestTCPUnauthenticatedCannotStarve: clients without a token that fill
// every connection slot of the TCP listener — keep-alive connections
// answered 401 and connections that send nothing — never lock a token
// holder out, and a refused connection is closed after its answer. The
// unix socket's cap is untouched.
func TestTCPUnauthenticatedCannotStarve(t *testing.T) {
	addr := serveTCP(t, api.ServerOptions{Token: testToken, Limits: api.Limits{MaxConns: 16}})
	base := "http://" + addr

	// 32 idle connections and 32 refused keep-alive attempts: twice the cap.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 32 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for range 32 {
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		io.WriteString(c, "GET /v1/sites HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n\r\n")
	}
	// A token holder gets in, every time, while they are all open.
	hc := &http.Client{Timeout: 8 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	cl := api.NewClient(base, testToken, hc)
	for i := range 10 {
		if _, err := cl.Sites(context.Background()); err != nil {
			t.Fatalf("request %d of a token holder while unauthenticated clients hold %d connections: %v", i, len(held), err)
		}
	}
	// An authenticated keep-alive connection is not taken by later
	// unauthenticated ones.
	kc := api.NewClient(base, testToken, &http.Client{Timeout: 8 * time.Second})
	if _, err := kc.Sites(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 32 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	if _, err := kc.Sites(context.Background()); err != nil {
		t.Fatalf("a token holder's keep-alive connection after 32 more unauthenticated ones: %v", err)
	}
	// A refused request closes its connection.
	c, resp := refusedConn(t, addr)
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("answer without a token: %d close=%v, want 401 with Connection: close", resp.StatusCode, resp.Close)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a refused connection stays open: read = %v, want EOF", err)
	}
	c.Close()
}

// TestLimitsUnauthDefaults: the unauthenticated share is a small part of
// MaxConns, per address smaller still, never more than the whole.
func TestLimitsUnauthDefaults(t *testing.T) {
	l := api.Limits{}.WithDefaults()
	if l.MaxUnauthConns != api.DefaultMaxConns/8 || l.MaxUnauthPerAddr != l.MaxUnauthConns/4 {
		t.Fatalf("defaults %+v", l)
	}
	l = api.Limits{MaxConns: 3}.WithDefaults()
	if l.MaxUnauthConns != 3 || l.MaxUnauthPerAddr != 2 {
		t.Fatalf("small cap: %+v", l)
	}
}
