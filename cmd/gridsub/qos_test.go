package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge"
)

// qosRun is the JSON summary of a job run, with what the QoS tests read.
type qosRun struct {
	ID        string  `json:"id"`
	State     string  `json:"state"`
	Attempts  int     `json:"attempts"`
	ExitCode  *int    `json:"exit_code"`
	Tier      string  `json:"tier"`
	TierWhy   string  `json:"tier_why"`
	Sites     []qPart `json:"sites"`
	Withdrawn []qPart `json:"copies_withdrawn"`
	Outputs   []string
	Events    []bridge.Event `json:"events"`
}

type qPart struct {
	Site     string `json:"site"`
	Nodes    int    `json:"nodes"`
	RemoteID string `json:"remote_id"`
	State    string `json:"state"`
}

func (r qosRun) events(kind string) []bridge.Event {
	var out []bridge.Event
	for _, e := range r.Events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func runQoS(t *testing.T, args ...string) qosRun {
	t.Helper()
	args = append(args, "--output", "json", "--out-dir", t.TempDir(), "--time-scale", "1000")
	_, stdout, stderr := gridsub(t, args...)
	var r qosRun
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	return r
}

// TestExampleQoSHigh checks examples/qos-high.yaml's comment: with Beijing
// failing at +30s, copy 0 at Beijing is lost, copy 1 at Shanghai completes
// and is the result, in one attempt; only its outputs come back.
func TestExampleQoSHigh(t *testing.T) {
	r := runQoS(t, "examples/qos-high.yaml", "--inject-failure", "Beijing@30s")
	if r.State != "completed" || r.Attempts != 1 || r.Tier != bridge.TierHigh {
		t.Fatalf("%+v", r)
	}
	if len(r.Sites) != 1 || r.Sites[0].Site != "Shanghai" || r.Sites[0].Nodes != 2 {
		t.Fatalf("result from %+v, want Shanghai:2", r.Sites)
	}
	if len(r.Withdrawn) != 1 || r.Withdrawn[0].Site != "Beijing" || r.Withdrawn[0].State != "lost" {
		t.Fatalf("withdrawn %+v, want the lost Beijing copy", r.Withdrawn)
	}
	d := r.events("dispatch")
	if len(d) != 1 || !strings.Contains(d[0].Msg, "copy 0 at Beijing:2, copy 1 at Shanghai:2, both now") {
		t.Fatalf("dispatch %+v", d)
	}
	if sub := r.events("submitted-remote"); len(sub) != 2 || sub[0].Site == sub[1].Site {
		t.Fatalf("want one submission at each of two sites: %+v", sub)
	}
	for _, o := range r.Outputs {
		if strings.Contains(o, "Beijing") {
			t.Fatalf("an output of the losing copy came back: %v", r.Outputs)
		}
	}
	if len(r.Outputs) == 0 {
		t.Fatal("the winner's outputs did not come back")
	}
	// Without the failure both copies run; one wins and the job ends once.
	r = runQoS(t, "examples/qos-high.yaml")
	if r.State != "completed" || len(r.Sites) != 1 || len(r.Withdrawn) != 1 || len(r.events("completed")) != 1 {
		t.Fatalf("without a failure: %+v", r)
	}
}

// TestExampleQoSLow checks examples/qos-low.yaml's comment: the backup is
// passive; with Beijing failing at +1m it is submitted at Shanghai once
// Beijing has not answered for 2m, and completes; without the failure it is
// never submitted.
func TestExampleQoSLow(t *testing.T) {
	r := runQoS(t, "examples/qos-low.yaml", "--inject-failure", "Beijing@1m")
	if r.State != "completed" || r.Attempts != 1 || r.Tier != bridge.TierLow {
		t.Fatalf("%+v", r)
	}
	if len(r.Sites) != 1 || r.Sites[0].Site != "Shanghai" || len(r.Withdrawn) != 1 || r.Withdrawn[0].Site != "Beijing" || r.Withdrawn[0].State != "lost" {
		t.Fatalf("sites %+v withdrawn %+v", r.Sites, r.Withdrawn)
	}
	d := r.events("dispatch")
	if len(d) != 1 || !strings.Contains(d[0].Msg, "primary at Beijing:1, backup at Shanghai:1 (passive") {
		t.Fatalf("dispatch %+v", d)
	}
	a := r.events("backup-activated")
	if len(a) != 1 {
		t.Fatalf("backup-activated %+v", a)
	}
	if lost := a[0].Time.Sub(r.Events[0].Time); lost.Minutes() < 3 {
		t.Fatalf("backup activated %s after submission; want after the failure (+1m) and down_after (2m)", lost)
	}
	r = runQoS(t, "examples/qos-low.yaml")
	if r.State != "completed" || len(r.Sites) != 1 || r.Sites[0].Site != "Beijing" {
		t.Fatalf("without a failure: %+v", r)
	}
	for _, e := range r.events("submitted-remote") {
		if e.Site != "Beijing" {
			t.Fatalf("the backup was submitted although the primary succeeded: %+v", e)
		}
	}
}

// TestExampleFailingRetries checks examples/failing.yaml's comment: three
// attempts at Beijing, Shanghai, Harbin, then failed with exit code 3.
func TestExampleFailingRetries(t *testing.T) {
	r := runQoS(t, "examples/failing.yaml")
	if r.State != "failed" || r.Attempts != 3 || r.ExitCode == nil || *r.ExitCode != 3 || r.Tier != bridge.TierNone {
		t.Fatalf("%+v", r)
	}
	var at []string
	for _, e := range r.events("submitted-remote") {
		at = append(at, e.Site)
	}
	if strings.Join(at, ",") != "Beijing,Shanghai,Harbin" {
		t.Fatalf("attempts at %v, want Beijing,Shanghai,Harbin", at)
	}
	if n := len(r.events("retry")); n != 2 {
		t.Fatalf("%d retry events", n)
	}
}

func TestInjectFailureUsage(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"Beijing", "SITE@DELAY"},
		{"Beijing@soon", "DELAY \"soon\""},
		{"Beijing@30s+never", "REPAIR \"never\""},
		{"Atlantis@30s", "no simulated site \"Atlantis\""},
	} {
		code, _, stderr := gridsub(t, "examples/hello.yaml", "--inject-failure", c.arg, "--out-dir", t.TempDir())
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %s", c.arg, code, stderr)
		}
	}
}

// TestStatusSaysTier: the summary names the tier and why.
func TestStatusSaysTier(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "j.yaml")
	if err := os.WriteFile(job, []byte("name: t\ncommand: [\"true\"]\nresources: {nodes: 1, walltime: 10m}\nscheduling: {deadline: +20m}\nsimulate: {runtime: 1m}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := gridsub(t, job, "--out-dir", t.TempDir(), "--time-scale", "1000")
	if code != 0 || !strings.Contains(stdout, "tier       high — auto: deadline") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestExampleDeadlineTier checks examples/deadline.yaml's comment: auto
// gives the low tier, whose passive backup is never submitted; a +40m
// deadline gives high.
func TestExampleDeadlineTier(t *testing.T) {
	r := runQoS(t, "examples/deadline.yaml")
	if r.State != "completed" || r.Tier != bridge.TierLow || !strings.HasPrefix(r.TierWhy, "auto: deadline") {
		t.Fatalf("%+v", r)
	}
	if sub := r.events("submitted-remote"); len(sub) != 1 || len(r.Withdrawn) != 1 || r.Withdrawn[0].RemoteID != "" {
		t.Fatalf("submissions %+v, withdrawn %+v: want the primary only, the passive backup never submitted", sub, r.Withdrawn)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(repoRoot, "examples/deadline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(dir, "tight.yaml")
	if err := os.WriteFile(job, []byte(strings.Replace(string(b), "deadline: +2h ", "deadline: +40m", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = runQoS(t, job); r.Tier != bridge.TierHigh || len(r.events("submitted-remote")) != 2 {
		t.Fatalf("+40m: %+v", r)
	}
}
