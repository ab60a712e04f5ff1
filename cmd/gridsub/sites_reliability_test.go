package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/daemon"
)

// reliabilityCols returns the AVAIL, R(1h) and CHAIN columns of a site's row.
func reliabilityCols(t *testing.T, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(up|down) +(\d\.\d\d) +(\d+/\d+) +(never|just now|\d+[smhd] ago)( +\S+( backoff)?)?\s*$`).FindStringSubmatch(row(t, out, name))
	if m == nil {
		t.Fatalf("no AVAIL, R(1h), CHAIN in the row of %s:\n%s", name, out)
	}
	return strings.Join(m[1:4], " ")
}

func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSitesReliabilitySurvivesRestart: the daemon's availability model
// learns a site's failure from its health probes (Down stops answering,
// then answers again), `gridsub sites` and /metrics show it, and a
// restarted daemon (which probes nothing before the check) shows the same
// learned state, read back from the store.
func TestSitesReliabilitySurvivesRestart(t *testing.T) {
	d, err := os.MkdirTemp("", "gsrel")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	t.Setenv(envSocket, sock)
	down := new(atomic.Bool)
	start := func(health string) *daemon.Daemon {
		dm, err := daemon.Start(context.Background(), daemon.Options{Spec: twoSites(down), StateDir: state, Socket: sock,
			MetricsListen: "127.0.0.1:0", Cron: map[string]string{"cycle": "@every 1h", "health": health}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dm.Shutdown(context.Background()) })
		return dm
	}

	d1 := start("@every 100ms")
	waitSites(t, sock, map[string]string{"Remote": "ok", "Down": "ok"})
	down.Store(true)
	waitSites(t, sock, map[string]string{"Remote": "ok", "Down": "unreachable"})
	down.Store(false)
	waitSites(t, sock, map[string]string{"Remote": "ok", "Down": "ok"})

	code, text1, stderr := cli("sites")
	if code != 0 {
		t.Fatalf("sites: exit %d %s", code, stderr)
	}
	t.Logf("gridsub sites:\n%s", text1)
	// Remote never failed: r = 1. Down failed once after well under an
	// hour up and is up again: one state, one failure, and a 1 h job does
	// not fit in any uptime it has shown: r = 0.
	if got := reliabilityCols(t, text1, "Remote"); got != "up 1.00 0/0" {
		t.Errorf("Remote: %q, want up 1.00 0/0", got)
	}
	if got := reliabilityCols(t, text1, "Down"); got != "up 0.00 1/1" {
		t.Errorf("Down: %q, want up 0.00 1/1", got)
	}
	_, json1, _ := cli("sites", "--output", "json")
	var recs1 []api.Site
	if err := json.Unmarshal([]byte(json1), &recs1); err != nil || len(recs1) != 2 {
		t.Fatalf("sites -o json: %v\n%s", err, json1)
	}
	rd := recs1[1].Reliability
	if rd == nil || recs1[1].Name != "Down" || !rd.Up || rd.States != 1 || rd.Failures != 1 || rd.MTTFSeconds <= 0 ||
		rd.Horizon != "1h" || rd.R != 0 || rd.Since == nil {
		t.Fatalf("Down's reliability in JSON: %+v", rd)
	}
	m := metricsText(t, d1.MetricsAddr())
	for _, want := range []string{`gridsub_site_reliability{horizon="1h",site="Remote"} 1`, `gridsub_site_reliability{horizon="1h",site="Down"} 0`,
		`gridsub_site_failures_total{site="Down"} 1`, `gridsub_site_failures_total{site="Remote"} 0`} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := d1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Restarted, with no probe before the check: the model comes from the
	// store.
	d2 := start("@every 1h")
	code, text2, _ := cli("sites")
	if code != 0 {
		t.Fatalf("sites after the restart: exit %d", code)
	}
	for _, site := range []string{"Remote", "Down"} {
		if a, b := reliabilityCols(t, text1, site), reliabilityCols(t, text2, site); a != b {
			t.Errorf("%s after the restart: %q, before: %q", site, b, a)
		}
	}
	_, json2, _ := cli("sites", "--output", "json")
	var recs2 []api.Site
	if err := json.Unmarshal([]byte(json2), &recs2); err != nil || len(recs2) != 2 {
		t.Fatalf("sites -o json after the restart: %v\n%s", err, json2)
	}
	for i := range recs1 {
		a, b := recs1[i].Reliability, recs2[i].Reliability
		if b == nil || a.Up != b.Up || !a.Since.Equal(*b.Since) || a.States != b.States || a.Failures != b.Failures ||
			a.MTTFSeconds != b.MTTFSeconds || a.R != b.R {
			t.Errorf("%s after the restart: %+v, before: %+v", recs1[i].Name, b, a)
		}
	}
	if m := metricsText(t, d2.MetricsAddr()); !strings.Contains(m, `gridsub_site_failures_total{site="Down"} 1`+"\n") {
		t.Error("/metrics after the restart lacks Down's learned failure")
	}
}
