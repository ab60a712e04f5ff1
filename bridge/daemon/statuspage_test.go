package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble/fakesite"
	"github.com/gridsub/gridsub/bridge/daemon"
)

// hostileErr is the error of the site that is down: markup in it must be
// shown as text, never run or parsed.
const hostileErr = `dial tcp: <b id="injected">x</b><script>document.title="pwned"</script>`

// TestStatusPageInBrowser: the daemon's status page, loaded by a real
// headless Chromium, shows a running job (with its placement) and a site
// marked down (with its reason, markup in it escaped: no element is
// injected, the title is unchanged); over TCP the page needs the API's
// bearer token. The browser reaches the TCP listener through a loopback
// proxy that adds the token (a browser cannot send a bearer header of its
// own). Skips without chromium (Debian: apt-get install chromium).
func TestStatusPageInBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH: install Debian's package (apt-get install -y chromium; scripts/test.sh does) to run the status page's browser test")
	}
	state, sock := dirs(t)
	down := new(atomic.Bool)
	down.Store(true)
	// Two sites of a real kind (the daemon probes their health) backed by
	// simulated ones: Remote is down, Other runs the job.
	spec := fakesite.Spec(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
		fakesite.Site{Name: "Remote", Kind: "fake", Nodes: 8, Cores: 2, H: 1, Wrap: func(b backends.Backend) backends.Backend {
			return fakesite.Flaky{Backend: b, Down: down, Err: errors.New(hostileErr)}
		}},
		fakesite.Site{Name: "Other", Kind: "fake", Nodes: 4, Cores: 2, H: 1})
	tok := make([]byte, 24)
	rand.Read(tok)
	token := hex.EncodeToString(tok)
	d, err := daemon.Start(context.Background(), daemon.Options{Spec: spec, StateDir: state, Socket: sock, TimeScale: 1,
		SimTick: 20 * time.Millisecond, Listen: "127.0.0.1:0", Token: token,
		Cron: map[string]string{"cycle": "@every 50ms", "health": "@every 100ms"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, d) })
	c := api.NewUnixClient(sock)
	r := request("long-run", 2, time.Hour, 2*time.Hour)
	r.Sites = []string{"Other"}
	j, err := c.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, j.ID, 15*time.Second, bridge.Running)
	siteNamed(t, c, "Remote", 10*time.Second, func(s api.Site) bool { return strings.HasPrefix(s.Status, api.SiteUnreachable) })

	base := "http://" + d.TCPAddr() + "/"
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET / over TCP without the token: %d, want 401", resp.StatusCode)
	}
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	inner := proxy.Director
	proxy.Director = func(r *http.Request) { inner(r); r.Header.Set("Authorization", "Bearer "+token) }
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)

	// The headers first (plain GET through the proxy).
	resp, err = http.Get(ps.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") || strings.Contains(string(raw), "<script") {
		t.Fatalf("GET /: %d %v\n%s", resp.StatusCode, resp.Header, raw)
	}

	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-dev-shm-usage", "--user-data-dir="+profile, "--virtual-time-budget=2000", "--dump-dom", ps.URL+"/")
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := string(out)
	row := func(attr, val string) string {
		m := regexp.MustCompile(`(?s)<tr[^>]*` + attr + `="` + regexp.QuoteMeta(val) + `"[^>]*>.*?</tr>`).FindString(dom)
		if m == "" {
			t.Fatalf("no row %s=%q in the page the browser built:\n%s", attr, val, dom)
		}
		return m
	}
	if !strings.Contains(dom, "<title>gridsub status</title>") {
		t.Errorf("title changed (script ran?):\n%s", dom)
	}
	if strings.Contains(dom, `<b id="injected"`) || strings.Contains(dom, "<script") {
		t.Errorf("markup of a site's error reached the DOM:\n%s", dom)
	}
	rem := row("data-site", "Remote")
	if !strings.Contains(rem, `class="down"`) || !strings.Contains(rem, "DOWN: unreachable: dial tcp: &lt;b id=\"injected\"&gt;") {
		t.Errorf("Remote not shown down with its escaped reason: %s", rem)
	}
	if h := row("data-site", "Other"); !strings.Contains(h, `class="ok"`) {
		t.Errorf("Other not shown ok: %s", h)
	}
	// The availability model: Remote's failed probe is a failure it learned.
	if !strings.Contains(rem, "<td data-reliability=\"\">r(1h)=0.00 down, 1 states / 1 failures</td>") {
		t.Errorf("Remote's reliability not shown down with its learned failure: %s", rem)
	}
	if h := row("data-site", "Other"); !strings.Contains(h, "r(1h)=1.00 up, 0 states / 0 failures") {
		t.Errorf("Other's reliability not shown: %s", h)
	}
	live := regexp.MustCompile(`(?s)<h2 id="live">.*?</table>`).FindString(dom)
	if !strings.Contains(live, `data-job="`+j.ID+`"`) || !strings.Contains(live, "<td data-state=\"\">running</td>") || !strings.Contains(live, "Other:2") {
		t.Errorf("the running job %s is not shown running on Other:2 among the jobs at the sites:\n%s", j.ID, live)
	}
	if recent := regexp.MustCompile(`(?s)<h2 id="recent">.*?</table>`).FindString(dom); !strings.Contains(recent, `data-job="`+j.ID+`"`) ||
		!strings.Contains(recent, "running: running on Other:2") {
		t.Errorf("latest jobs lack the job's events: %s", recent)
	}
}
