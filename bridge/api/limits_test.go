package api_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/api/apitest"
)

// testToken is a token of the length `openssl rand -hex 32` prints.
const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// serveTCP serves a broker on a real loopback TCP listener with opts and
// returns its address; the server is shut down at the end of the test.
func serveTCP(t *testing.T, opts api.ServerOptions) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(newSQLiteBroker(t), opts)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// trickle writes head at once, then body one byte per second until the
// server closes the connection, and returns how long the server took to
// close it and the first line it answered ("" if none). It gives up (and
// fails the test) after 10 s.
func trickle(t *testing.T, addr, head, body string) (time.Duration, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0 := time.Now()
	c.SetDeadline(t0.Add(10 * time.Second)) // the test's own deadline
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(c)
	first, _ := r.ReadString('\n')
	_, err = io.Copy(io.Discard, r) // until the server closes
	el := time.Since(t0)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s (first line %q)", el, first)
	}
	return el, strings.TrimSpace(first)
}

// TestSlowClientsCutOff: a client that holds its headers open, and a
// client that trickles its body at 1 byte/s with or without a token, are
// all disconnected within the configured timeouts.
func TestSlowClientsCutOff(t *testing.T) {
	lim := api.Limits{ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: 1500 * time.Millisecond,
		WriteTimeout: 2 * time.Second, IdleTimeout: time.Second}
	addr := serveTCP(t, api.ServerOptions{Token: testToken, Limits: lim})
	const slack = 2 * time.Second // a loaded CI machine
	post := func(auth string) string {
		return "POST /v1/jobs HTTP/1.1\r\nHost: gridsub\r\nContent-Type: application/json\r\n" + auth +
			"Content-Length: 100\r\n\r\n"
	}
	body := strings.Repeat("x", 100) // 100 s at 1 byte/s
	for _, c := range []struct {
		name, head, body string
		within           time.Duration
		status           string // the answer's status line prefix, "" for none
	}{
		{"headers held open, no token", "GET /v1/sites HTTP/1.1\r\nHost: gridsub\r\nX-Slow: ", strings.Repeat("a", 100), lim.ReadHeaderTimeout, ""},
		{"headers held open, with token", "GET /v1/sites HTTP/1.1\r\nHost: gridsub\r\nAuthorization: Bearer " + testToken + "\r\nX-Slow: ", strings.Repeat("a", 100), lim.ReadHeaderTimeout, ""},
		{"body trickled, with token", post("Authorization: Bearer " + testToken + "\r\n"), body, lim.ReadTimeout, "HTTP/1.1 408"},
		{"body trickled, no token", post(""), body, lim.ReadTimeout, "HTTP/1.1 401"},
		{"body trickled, wrong token", post("Authorization: Bearer nope\r\n"), body, lim.ReadTimeout, "HTTP/1.1 401"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			el, first := trickle(t, addr, c.head, c.body)
			if el > c.within+slack {
				t.Errorf("disconnected after %s, want within %s (+%s slack)", el, c.within, slack)
			}
			if !strings.HasPrefix(first, c.status) {
				t.Errorf("answer %q, want %q", first, c.status)
			}
			t.Logf("disconnected after %s; answer %q", el.Round(time.Millisecond), first)
		})
	}
}

// TestOversizeBody: a body over MaxBody is refused with 413 and a JSON
// error naming the limit, whether its length is declared or chunked.
func TestOversizeBody(t *testing.T) {
	addr := serveTCP(t, api.ServerOptions{Token: testToken, MaxBody: 4096})
	big := `{"Name":"` + strings.Repeat("x", 10000) + `"}`
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = io.MultiReader(body) // no length known: sent chunked
		}
		rq, _ := http.NewRequest("POST", "http://"+addr+"/v1/jobs", body)
		rq.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		var eb api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || eb.Code != api.CodeTooLarge || !strings.Contains(eb.Error, "limit of 4096 bytes") {
			t.Errorf("chunked=%v: %d %+v, want 413 too_large naming the limit", chunked, resp.StatusCode, eb)
		}
	}
	// The Go client maps it to ErrBadRequest-class *Error.
	c := api.NewClient("http://"+addr, testToken, nil)
	r := req(strings.Repeat("n", 5000), 1)
	_, err := c.Submit(context.Background(), r)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 413 || !strings.Contains(err.Error(), "4096 bytes") {
		t.Fatalf("client: %v", err)
	}
}

// TestConnectionCap: a listener serves at most MaxConns connections of
// token holders; the next client waits until one closes. (Connections
// without a token do not hold slots: TestTCPUnauthenticatedCannotStarve.)
func TestConnectionCap(t *testing.T) {
	addr := serveTCP(t, api.ServerOptions{Token: testToken, Limits: api.Limits{MaxConns: 2, ReadHeaderTimeout: 20 * time.Second}})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
		// One request with the token, and the connection kept alive.
		io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("an authenticated request: %v %v", resp, err)
		}
	}
	c := api.NewClient("http://"+addr, testToken, &http.Client{Timeout: 500 * time.Millisecond})
	if _, err := c.Health(context.Background()); err == nil {
		t.Fatal("a third connection was served while two were held open (MaxConns 2)")
	}
	held[0].Close()
	c = api.NewClient("http://"+addr, testToken, &http.Client{Timeout: 5 * time.Second})
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatalf("after one held connection closed: %v", err)
	}
}

// TestTokenRules: a TCP listener needs a token of MinTokenLen characters,
// and the error never shows the token.
func TestTokenRules(t *testing.T) {
	b := newSQLiteBroker(t)
	for _, tok := range []string{"", "s3cret", strings.Repeat("k", api.MinTokenLen-1)} { // loopback listeners only
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		err = api.NewServer(b, api.ServerOptions{Token: tok}).Serve(l)
		want := api.ErrShortToken
		if tok == "" {
			want = api.ErrNoToken
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("Serve with token %q: %v, want %v with advice", tok, err, want)
		}
		if tok != "" && strings.Contains(err.Error(), tok) {
			t.Errorf("the error shows the token: %v", err)
		}
		if _, err := api.ListenTCP("127.0.0.1:0", api.TCPOptions{Token: tok}); !errors.Is(err, want) {
			t.Errorf("ListenTCP with token %q: %v, want %v", tok, err, want)
		}
	}
	l, err := api.ListenTCP("127.0.0.1:0", api.TCPOptions{Token: testToken})
	if err != nil {
		t.Fatalf("a 64-character token on loopback: %v", err)
	}
	l.Close()
}

// TestPlaintextOnlyOnLoopback: plain HTTP on every interface is refused
// unless explicitly allowed; loopback is fine.
// (Nothing here binds a non-loopback address: ListenTCP refuses before it
// binds, and Serve is given listeners that only claim such an address.)
func TestPlaintextOnlyOnLoopback(t *testing.T) {
	for _, a := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "gridhost.example:0"} {
		_, err := api.ListenTCP(a, api.TCPOptions{Token: testToken})
		if !errors.Is(err, api.ErrPlaintext) || !strings.Contains(err.Error(), "broker.insecure_plaintext") || !strings.Contains(err.Error(), "broker.tls_cert") {
			t.Errorf("%s without TLS: %v, want ErrPlaintext naming the options", a, err)
		}
	}
	b := newSQLiteBroker(t)
	every := fakeListener{addr: &net.TCPAddr{IP: net.IPv4zero, Port: 8470}}
	if err := api.NewServer(b, api.ServerOptions{Token: testToken}).Serve(every); !errors.Is(err, api.ErrPlaintext) {
		t.Fatalf("Serve on %s without TLS: %v, want ErrPlaintext", every.addr, err)
	}
	// With the override Serve goes on to Accept (which this listener fails).
	if err := api.NewServer(b, api.ServerOptions{Token: testToken, InsecurePlaintext: true}).Serve(every); !errors.Is(err, errFakeAccept) {
		t.Fatalf("Serve on %s with the override: %v, want it to accept", every.addr, err)
	}
	for _, a := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		l, err := api.ListenTCP(a, api.TCPOptions{Token: testToken})
		if err != nil {
			if a == "[::1]:0" && strings.Contains(err.Error(), "cannot assign") {
				continue // no IPv6 loopback here
			}
			t.Fatalf("%s without TLS: %v", a, err)
		}
		l.Close()
	}
}

var errFakeAccept = errors.New("fake listener: no connections")

// fakeListener claims an address and accepts nothing.
type fakeListener struct{ addr net.Addr }

func (f fakeListener) Accept() (net.Conn, error) { return nil, errFakeAccept }
func (f fakeListener) Close() error              { return nil }
func (f fakeListener) Addr() net.Addr            { return f.addr }

// TestTLSRoundTrip: a TLS listener, a self-signed
// certificate made now, the Go client trusting it through a CA file.
func TestTLSRoundTrip(t *testing.T) {
	cert, key := apitest.SelfSigned(t)
	tc, err := api.ServerTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := api.ListenTCP("127.0.0.1:0", api.TCPOptions{Token: testToken, TLS: tc})
	if err != nil {
		t.Fatalf("with TLS: %v", err)
	}
	srv := api.NewServer(newSQLiteBroker(t), api.ServerOptions{Token: testToken})
	go api.NewHTTPServer(srv.Handler(), api.Limits{}, nil).Serve(l)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	base := fmt.Sprintf("https://127.0.0.1:%d", port)

	ctls, err := api.ClientTLS(cert)
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(base, testToken, api.HTTPClient(ctls, 5*time.Second))
	j, err := c.Submit(context.Background(), req("over-tls", 2))
	if err != nil {
		t.Fatalf("submit over TLS: %v", err)
	}
	if got, err := c.Job(context.Background(), j.ID); err != nil || got.Req.Name != "over-tls" {
		t.Fatalf("job over TLS: %+v %v", got, err)
	}
	// Without the CA the certificate is not trusted.
	if _, err := api.NewClient(base, testToken, api.HTTPClient(nil, 5*time.Second)).Health(context.Background()); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without the CA: %v, want a certificate error", err)
	}
	// Plain HTTP to the TLS port gets nothing useful.
	if _, err := api.NewClient(fmt.Sprintf("http://127.0.0.1:%d", port), testToken, &http.Client{Timeout: 5 * time.Second}).Health(context.Background()); err == nil {
		t.Fatal("plain HTTP to the TLS port answered")
	}
	// TLS 1.1 is refused.
	old := ctls.Clone()
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := api.NewClient(base, testToken, api.HTTPClient(old, 5*time.Second)).Health(context.Background()); err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
}

func TestTLSFiles(t *testing.T) {
	cert, key := apitest.SelfSigned(t)
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ServerTLS(cert, key); !errors.Is(err, api.ErrTLS) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable key: %v, want ErrTLS advising chmod 600", err)
	}
	os.Chmod(key, 0o600)
	if _, err := api.ServerTLS(key, key); !errors.Is(err, api.ErrTLS) {
		t.Errorf("the key as certificate: %v, want ErrTLS", err)
	}
	if _, err := api.ServerTLS(cert, ""); !errors.Is(err, api.ErrTLS) {
		t.Errorf("no key: %v, want ErrTLS", err)
	}
	if _, err := api.ClientTLS(key); !errors.Is(err, api.ErrTLS) || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
	if _, err := api.ClientTLS("/dev/zero"); !errors.Is(err, api.ErrTLS) || !strings.Contains(err.Error(), "regular file") {
		t.Errorf("/dev/zero as CA file: %v", err)
	}
}

// TestClientBoundsAnswers: a server that answers without end does not
// exhaust the client's memory.
func TestClientBoundsAnswers(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"sites": ["`)
		chunk := []byte(strings.Repeat("a", 1<<20))
		for range 4 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		io.WriteString(w, `"]}`)
	}))
	defer ts.Close()
	_, err := api.NewClient(ts.URL, "", nil).WithMaxResponse(1 << 20).Sites(context.Background())
	if err == nil || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Fatalf("an endless answer: %v", err)
	}
}
