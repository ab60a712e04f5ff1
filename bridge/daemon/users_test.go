package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/daemon"
)

// What a probe of another user's job must get.
type expect int

const (
	hidden    expect = iota + 1 // 404: the job is not found, as an unknown one
	forbidden                   // 403: administrators only
	unauth                      // 401: the service token only
	noRoute                     // 404: the route is not served on this listener
	refused                     // 400: the request names the job and is refused as if it did not exist
	ownOnly                     // 200, and nothing of the other user's job in the answer
)

func (e expect) String() string {
	return [...]string{"?", "404 hidden", "403 forbidden", "401 unauthorized", "404 no route", "400 refused", "200 without the job"}[e]
}

// probe is one request of user B about user A's job: the path and body
// have the placeholders {id} (A's job id) and {name} (its name).
type probe struct {
	Method, Path, Body string
	TCP, Socket        expect // what B gets over TCP with a token, on the socket as another uid
}

// ownershipCases are the probes of every route the daemon serves
// (api.Routes, api.PageRoute, daemon.Routes): TestEveryRouteHasAnOwnershipCase
// fails when a route has none.
func ownershipCases() map[string][]probe {
	same := func(m, p, body string, e expect) []probe { return []probe{{m, p, body, e, e}} }
	job := func(m, p string) []probe { return same(m, p, "", hidden) }
	admin := func(m, p, body string) []probe { return same(m, p, body, forbidden) }
	open := func(m, p, body string) []probe { return same(m, p, body, ownOnly) }
	return map[string][]probe{
		"POST /v1/jobs": {
			// Submitting as A, or depending on A's job, is refused.
			{"POST", "/v1/jobs", `{"Name":"x","Command":["/bin/true"],"Nodes":1,"Estimate":60000000000,"Owner":"alice"}`, forbidden, forbidden},
			{"POST", "/v1/jobs", `{"Name":"x","Command":["/bin/true"],"Nodes":1,"Estimate":60000000000,"AfterOK":["{id}"]}`, refused, refused},
			{"POST", "/v1/jobs", `{"Name":"x","Command":["/bin/true"],"Nodes":1,"Estimate":60000000000,"After":["{short}"]}`, refused, refused},
		},
		"GET /v1/jobs": {
			{"GET", "/v1/jobs", "", ownOnly, ownOnly},
			{"GET", "/v1/jobs?name={name}", "", ownOnly, ownOnly},
			{"GET", "/v1/jobs?events=true&order=newest", "", ownOnly, ownOnly},
		},
		"GET /v1/jobs/{id}": {
			{"GET", "/v1/jobs/{id}", "", hidden, hidden},
			{"GET", "/v1/jobs/{short}", "", hidden, hidden}, // a shortened id
		},
		"GET /v1/jobs/{id}/events":  job("GET", "/v1/jobs/{id}/events"),
		"POST /v1/jobs/{id}/cancel": job("POST", "/v1/jobs/{id}/cancel"),
		"GET /v1/sites":             open("GET", "/v1/sites", ""),
		"GET /v1/reservations":      open("GET", "/v1/reservations", ""),
		"GET /v1/health":            open("GET", "/v1/health", ""),
		"GET /openapi.yaml":         open("GET", "/openapi.yaml", ""),
		"GET /v1/plugins":           open("GET", "/v1/plugins", ""),
		"POST /v1/explain": {
			{"POST", "/v1/explain", `{"Name":"x","Command":["/bin/true"],"Nodes":1,"Estimate":60000000000}`, ownOnly, ownOnly},
			// A dry run does not look at dependencies: it says nothing of A's job.
			{"POST", "/v1/explain", `{"Name":"x","Command":["/bin/true"],"Nodes":1,"Estimate":60000000000,"AfterOK":["{short}"]}`, ownOnly, ownOnly},
		},
		"GET /v1/jobs/{id}/explain":   job("GET", "/v1/jobs/{id}/explain"),
		"GET /v1/jobs/{id}/logs":      job("GET", "/v1/jobs/{id}/logs"),
		"POST /v1/sites/{name}/login": admin("POST", "/v1/sites/Harbin/login", `{}`),
		"POST /v1/jobs/{id}/hold":     job("POST", "/v1/jobs/{id}/hold"),
		"POST /v1/jobs/{id}/release":  job("POST", "/v1/jobs/{id}/release"),
		"POST /v1/jobs/{id}/requeue":  job("POST", "/v1/jobs/{id}/requeue"),
		"GET /v1/queue": {
			{"GET", "/v1/queue", "", ownOnly, ownOnly},
			{"GET", "/v1/queue?id={id}", "", ownOnly, ownOnly},
		},
		"POST /v1/tokens":             admin("POST", "/v1/tokens", `{"user":"bob","admin":true}`),
		"GET /v1/tokens":              admin("GET", "/v1/tokens", ""),
		"POST /v1/tokens/{id}/revoke": admin("POST", "/v1/tokens/user:alice/revoke", ""),
		"GET /v1/whoami":              open("GET", "/v1/whoami", ""),
		// Another user's site credentials: administrators only; one's own
		// list holds nothing of A's.
		"POST /v1/credentials": admin("POST", "/v1/credentials", `{"user":"alice","site":"Harbin","key":"x"}`),
		"GET /v1/credentials": {
			{"GET", "/v1/credentials", "", ownOnly, ownOnly},
			{"GET", "/v1/credentials?user=alice", "", forbidden, forbidden},
		},
		"DELETE /v1/credentials/{site}": admin("DELETE", "/v1/credentials/Harbin?user=alice", ""),
		api.PageRoute:                   open("GET", "/", ""),
		daemon.MetricsRoute:             {{"GET", "/metrics", "", unauth, ownOnly}},
		daemon.BackupRoute:              {{"POST", "/v1/store/backup", `{"path":"/tmp/gridsub-users-test-backup.db"}`, noRoute, forbidden}},
	}
}

func TestEveryRouteHasAnOwnershipCase(t *testing.T) {
	all := append(append(slices.Clone(api.Routes), api.PageRoute), daemon.Routes...)
	cases := ownershipCases()
	for _, r := range all {
		if len(cases[r]) == 0 {
			t.Errorf("route %q has no case in ownershipCases: say what another user gets from it", r)
		}
	}
	for r := range cases {
		if !slices.Contains(all, r) {
			t.Errorf("ownershipCases has %q, which the daemon does not serve", r)
		}
	}
}

// probeResult is what one probe got.
type probeResult struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
	Err    string `json:"err,omitempty"`
}

// send makes one request with hc to base.
func send(hc *http.Client, base, token string, p probe) probeResult {
	var body io.Reader
	if p.Body != "" {
		body = strings.NewReader(p.Body)
	}
	req, err := http.NewRequest(p.Method, base+p.Path, body)
	if err != nil {
		return probeResult{Err: err.Error()}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if p.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return probeResult{Err: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return probeResult{Status: resp.StatusCode, Body: string(b)}
}

func sockHTTP(socket string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// TestUsersProbe is not a test of its own: TestUsersSeeOnlyTheirOwnJobs
// runs the test binary with it as another uid, to send requests over the
// socket with that uid's peer credentials.
func TestUsersProbe(t *testing.T) {
	socket := os.Getenv("GRIDSUB_PROBE_SOCKET")
	if socket == "" {
		t.Skip("a helper: run by TestUsersSeeOnlyTheirOwnJobs as another uid")
	}
	var ps []probe
	if err := json.Unmarshal([]byte(os.Getenv("GRIDSUB_PROBES")), &ps); err != nil {
		t.Fatal(err)
	}
	hc := sockHTTP(socket)
	var out []probeResult
	for _, p := range ps {
		out = append(out, send(hc, "http://gridsub", "", p))
	}
	b, _ := json.Marshal(out)
	fmt.Printf("PROBE-RESULTS %s\n", b)
}

// check says what is wrong with r for a probe that expects e ("" if
// nothing): secret strings of A's job must never appear in an answer.
func check(e expect, r probeResult, secrets []string) string {
	if r.Err != "" {
		return "no answer: " + r.Err
	}
	want := map[expect]int{hidden: 404, forbidden: 403, unauth: 401, noRoute: 404, refused: 400, ownOnly: 200}[e]
	if r.Status != want {
		return fmt.Sprintf("HTTP %d, want %d (%s): %.300s", r.Status, want, e, r.Body)
	}
	switch e {
	case hidden:
		if !strings.Contains(r.Body, `"not_found"`) {
			return "a 404 that is not not_found: " + r.Body
		}
	case ownOnly:
		for _, s := range secrets {
			if strings.Contains(r.Body, s) {
				return fmt.Sprintf("the answer shows %q of the other user's job: %.300s", s, r.Body)
			}
		}
	}
	return ""
}

// addUser makes a throwaway local account (removed at the end).
func addUser(t *testing.T, name string) (uid, gid int) {
	t.Helper()
	if out, err := exec.Command("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// TestUsersSeeOnlyTheirOwnJobs: alice submits a job; bob — with his own
// token over TCP, and (when the tests run as root) as another uid on the
// shared socket — calls every route of the daemon on it
// (ownershipCases) and gets nothing of it: not found, forbidden, or an
// answer without it. Alice herself is then answered on the same routes,
// and her job is still hers, uncancelled, unheld.
func TestUsersSeeOnlyTheirOwnJobs(t *testing.T) {
	top, err := os.MkdirTemp("", "gsu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	// The socket's directory is reachable by every user; the state
	// directory is the daemon's own (0700).
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(top, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	state, socket := filepath.Join(top, "state"), filepath.Join(top, "run", "gridsub.sock")
	service := strings.Repeat("k", 40)
	d := startOpts(t, daemon.Options{StateDir: state, Socket: socket, TimeScale: 1, Listen: "127.0.0.1:0", Token: service, SharedSocket: true})
	ctx := context.Background()
	root := api.NewUnixClient(socket) // this process: the daemon's own user, an administrator
	if p, err := root.WhoAmI(ctx); err != nil || !p.Admin || p.Via != api.ViaSocket {
		t.Fatalf("whoami on the socket as the daemon's user: %+v %v", p, err)
	}
	base := "http://" + d.TCPAddr()
	token := func(u string) string {
		r, err := root.CreateToken(ctx, u, false)
		if err != nil {
			t.Fatal(err)
		}
		return r.Token
	}
	aliceTok, bobTok := token("alice"), token("bob")
	alice := api.NewClient(base, aliceTok, nil)
	if fi, err := os.Stat(filepath.Join(state, "tokens.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "tokens.json")); bytes.Contains(b, []byte(aliceTok)) {
		t.Fatal("the tokens file holds a token in clear")
	}

	name := "alices-secret-job-name"
	req := request(name, 1, 10*time.Hour, 20*time.Hour)
	ja, err := alice.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if ja.Req.Owner != "alice" {
		t.Fatalf("alice's job has owner %q", ja.Req.Owner)
	}
	waitState(t, alice, ja.ID, 30*time.Second, bridge.Running)
	idA := ja.ID
	short := idA[len(idA)-6:] // the suffix every command takes
	secrets := []string{idA, name}
	fill := func(p probe) probe {
		r := strings.NewReplacer("{id}", idA, "{short}", short, "{name}", name)
		p.Path, p.Body = r.Replace(p.Path), r.Replace(p.Body)
		return p
	}
	var all []probe
	for _, ps := range ownershipCases() {
		for _, p := range ps {
			all = append(all, fill(p))
		}
	}

	// Bob over TCP with his token.
	hc := &http.Client{Timeout: 30 * time.Second}
	for _, p := range all {
		if msg := check(p.TCP, send(hc, base, bobTok, p), secrets); msg != "" {
			t.Errorf("bob (token) %s %s: %s", p.Method, p.Path, msg)
		}
	}

	// Bob as another uid on the socket.
	if _, err := exec.LookPath("useradd"); os.Getuid() != 0 || err != nil {
		t.Log("not root, or no useradd: the cross-uid socket probes are skipped (they need a second uid); the token probes ran")
	} else {
		bobName := fmt.Sprintf("gsbob%d", os.Getpid()%100000)
		uid, gid := addUser(t, bobName)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(top, "probe.test")
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		pj, _ := json.Marshal(all)
		cmd := exec.Command(bin, "-test.run=^TestUsersProbe$", "-test.count=1", "-test.v")
		cmd.Dir = top
		cmd.Env = []string{"GRIDSUB_PROBE_SOCKET=" + socket, "GRIDSUB_PROBES=" + string(pj), "PATH=/usr/bin:/bin", "HOME=" + top}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the probe as %s: %v\n%s", bobName, err, out)
		}
		_, line, ok := strings.Cut(string(out), "PROBE-RESULTS ")
		if !ok {
			t.Fatalf("the probe as %s printed no results:\n%s", bobName, out)
		}
		line, _, _ = strings.Cut(line, "\n")
		var rs []probeResult
		if err := json.Unmarshal([]byte(line), &rs); err != nil || len(rs) != len(all) {
			t.Fatalf("the probe's results: %v (%d of %d)", err, len(rs), len(all))
		}
		for i, p := range all {
			if msg := check(p.Socket, rs[i], secrets); msg != "" {
				t.Errorf("%s (uid %d, socket) %s %s: %s", bobName, uid, p.Method, p.Path, msg)
			}
		}
		// The socket names the user: whoami says who, not an administrator.
		who := probe{Method: "GET", Path: "/v1/whoami"}
		pj, _ = json.Marshal([]probe{who, {Method: "POST", Path: "/v1/jobs", Body: `{"Name":"bobs","Command":["/bin/true"],"Nodes":1,"Estimate":60000000000}`}})
		cmd = exec.Command(bin, "-test.run=^TestUsersProbe$", "-test.count=1", "-test.v")
		cmd.Dir, cmd.SysProcAttr = top, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = []string{"GRIDSUB_PROBE_SOCKET=" + socket, "GRIDSUB_PROBES=" + string(pj), "PATH=/usr/bin:/bin", "HOME=" + top}
		out, err = cmd.CombinedOutput()
		_, line, _ = strings.Cut(string(out), "PROBE-RESULTS ")
		line, _, _ = strings.Cut(line, "\n")
		if err != nil || json.Unmarshal([]byte(line), &rs) != nil || len(rs) != 2 {
			t.Fatalf("whoami/submit as %s: %v\n%s", bobName, err, out)
		}
		var p api.Principal
		if json.Unmarshal([]byte(rs[0].Body), &p) != nil || p.User != bobName || p.Admin || p.UID != uid || p.Via != api.ViaSocket {
			t.Errorf("whoami as %s on the socket: %s", bobName, rs[0].Body)
		}
		var sr api.SubmitResponse
		if rs[1].Status != 201 || json.Unmarshal([]byte(rs[1].Body), &sr) != nil || sr.Job.Req.Owner != bobName {
			t.Errorf("a submission as %s on the socket: %d %s", bobName, rs[1].Status, rs[1].Body)
		} else if js, _, err := alice.List(ctx, bridge.Filter{}); err != nil || slices.ContainsFunc(js, func(j *bridge.Job) bool { return j.ID == sr.ID }) {
			t.Errorf("alice lists %s's job %s (%v)", bobName, sr.ID, err)
		}
	}

	// Alice is answered on her own job: the same routes are not shut to
	// everyone (each probe above could have failed for another reason).
	for _, p := range []probe{{Method: "GET", Path: "/v1/jobs/{id}"}, {Method: "GET", Path: "/v1/jobs/{short}"}, {Method: "GET", Path: "/v1/jobs/{id}/events"},
		{Method: "GET", Path: "/v1/jobs/{id}/logs"}, {Method: "GET", Path: "/v1/jobs?name={name}"}, {Method: "GET", Path: "/v1/queue?id={id}"}, {Method: "GET", Path: "/"}} {
		p = fill(p)
		r := send(hc, base, aliceTok, p)
		if r.Status != 200 || !strings.Contains(r.Body, idA) {
			t.Errorf("alice %s %s: HTTP %d %.300s", p.Method, p.Path, r.Status, r.Body)
		}
	}
	if r := send(hc, base, aliceTok, fill(probe{Method: "GET", Path: "/v1/jobs/{id}/explain"})); r.Status == 404 || r.Status == 403 {
		t.Errorf("alice explain: HTTP %d %s", r.Status, r.Body)
	}
	j, err := alice.Job(ctx, idA)
	if err != nil || j.State != bridge.Running || j.UserHold {
		t.Fatalf("after bob's attempts alice's job is %+v (%v); want it running, as she left it", j, err)
	}
	// The administrator sees it; alice cancels it.
	if _, err := root.Job(ctx, idA); err != nil {
		t.Errorf("the administrator does not see alice's job: %v", err)
	}
	if _, err := alice.Cancel(ctx, idA); err != nil {
		t.Errorf("alice cannot cancel her own job: %v", err)
	}
	// A revoked token is refused.
	if _, err := root.RevokeToken(ctx, "user:bob"); err != nil {
		t.Fatal(err)
	}
	if r := send(hc, base, bobTok, probe{Method: "GET", Path: "/v1/whoami"}); r.Status != 401 {
		t.Errorf("a revoked token: HTTP %d %s", r.Status, r.Body)
	}
}

// TestUserLimitsThroughTheAPI: over max_queued a submission is refused
// 429 with the numbers; over max_running the job waits with the reason,
// in its status and in explain.
func TestUserLimitsThroughTheAPI(t *testing.T) {
	state, socket := dirs(t)
	service := strings.Repeat("k", 40)
	d := startOpts(t, daemon.Options{StateDir: state, Socket: socket, TimeScale: 1, Listen: "127.0.0.1:0", Token: service,
		Spec: assemble.Spec{Users: map[string]bridge.UserLimits{"alice": {MaxQueued: 1, MaxRunning: 1}}}})
	ctx := context.Background()
	r, err := api.NewUnixClient(socket).CreateToken(ctx, "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	alice := api.NewClient("http://"+d.TCPAddr(), r.Token, nil)
	long := request("long", 1, 10*time.Hour, 20*time.Hour)
	j1, err := alice.Submit(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, alice, j1.ID, 30*time.Second, bridge.Running)
	j2, err := alice.Submit(ctx, long) // one waiting: max_queued 1 allows it
	if err != nil {
		t.Fatal(err)
	}
	_, err = alice.Submit(ctx, long)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || !errors.Is(err, bridge.ErrOverLimit) || !strings.Contains(err.Error(), "max_queued is 1") {
		t.Fatalf("a third submission: %v; want 429 over_limit naming max_queued", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		j, err := alice.Job(ctx, j2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == bridge.Queued && strings.Contains(j.Reason, "max_running is 1") {
			break
		}
		if j.State != bridge.Queued || time.Now().After(deadline) {
			t.Fatalf("alice's second job: %s %q; want queued, waiting for max_running", j.State, j.Reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e, err := alice.ExplainJob(ctx, j2.ID)
	if err != nil || e.Action != "wait" || len(e.Reasons) == 0 || !strings.Contains(e.Reasons[0], "max_running is 1") {
		t.Fatalf("explain: %+v %v", e, err)
	}
	// Her first ends: the second starts.
	if _, err := alice.Cancel(ctx, j1.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, alice, j2.ID, 30*time.Second, bridge.Running)
}
