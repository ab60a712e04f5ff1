package main

// One acceptance test per scheduling field of examples/reference.yaml: each
// job file goes the user's way (jobfile.Parse, toRequest, Broker.Submit,
// one broker cycle with a real planner on simulated sites), and each test
// fails if the field is ignored, because the same job without it lands
// elsewhere (or is accepted where it should be refused).

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/jobfile"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/simbackend"
)

type fieldSite struct {
	name  string
	nodes int
	h     float64
}

var fieldEpoch = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

// placeJobs submits the job files in order to a fresh broker over the
// sites (links: seconds per byte between any two different sites) and runs
// one cycle. It returns, per job name, where the job went ("A:1",
// "A:8+B:4", "rejected: ...") or the submission's error ("refused: ...").
func placeJobs(t *testing.T, planner string, sites []fieldSite, secPerByte float64, files ...string) map[string]string {
	t.Helper()
	e := simbackend.NewEngine(fieldEpoch, 1)
	var cfgs []bridge.SiteConfig
	for _, s := range sites {
		ss, err := simbackend.NewSite(e, simbackend.SiteConfig{Name: s.name, Nodes: s.nodes})
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, bridge.SiteConfig{Name: s.name, Backend: ss, H: s.h, Simulated: true})
	}
	links := make([][]policy.Link, len(sites))
	for i := range links {
		links[i] = make([]policy.Link, len(sites))
		for k := range links[i] {
			if k != i {
				links[i][k] = policy.Link{SecPerByte: secPerByte}
			}
		}
	}
	pl, err := registry.ByName(planner)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(bridge.Options{Sites: cfgs, Planner: pl, Links: links, MultiSite: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out := map[string]string{}
	ids := map[string]string{}
	for _, f := range files {
		j, err := jobfile.Parse("job.yaml", []byte(f))
		if err != nil {
			t.Fatalf("job file: %v\n%s", err, f)
		}
		req, err := toRequest(j, fieldEpoch, "")
		if err != nil {
			t.Fatal(err)
		}
		bj, err := b.Submit(ctx, req, fieldEpoch)
		if err != nil {
			out[j.Name] = "refused: " + err.Error()
			continue
		}
		ids[j.Name] = bj.ID
	}
	if _, err := b.Cycle(ctx, fieldEpoch); err != nil {
		t.Fatal(err)
	}
	for name, id := range ids {
		j, err := b.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		switch j.State {
		case bridge.Rejected:
			out[name] = "rejected: " + j.Reason
		case bridge.Queued:
			out[name] = "queued"
		default:
			out[name] = j.Sites()
		}
	}
	return out
}

// jobYAML is a 1-node job with the given scheduling lines (indented by the
// caller's "\n  " joins).
func jobYAML(name string, nodes int, walltime string, sched ...string) string {
	s := "name: " + name + "\ncommand: [hostname]\nresources: {nodes: " + strconv.Itoa(nodes) + ", walltime: " + walltime + "}\n"
	if len(sched) > 0 {
		s += "scheduling:\n  " + strings.Join(sched, "\n  ") + "\n"
	}
	return s
}

var threeEqual = []fieldSite{{"A", 8, 1}, {"B", 8, 1}, {"C", 8, 1}}

func TestFieldSites(t *testing.T) {
	got := placeJobs(t, "optimal-easy", threeEqual, 0,
		jobYAML("with", 1, "1h", "sites: [C]"), jobYAML("without", 1, "1h"))
	if got["with"] != "C:1" || got["without"] != "A:1" {
		t.Fatalf("sites: %v; want with on C:1 and without on A:1", got)
	}
}

func TestFieldPrefer(t *testing.T) {
	got := placeJobs(t, "optimal-easy", threeEqual, 0,
		jobYAML("with", 1, "1h", "prefer: [B]"), jobYAML("without", 1, "1h"))
	if got["with"] != "B:1" || got["without"] != "A:1" {
		t.Fatalf("prefer: %v; want with on B:1 (a tie it wins) and without on A:1", got)
	}
	// The benefit planner honours it too.
	got = placeJobs(t, "benefit", threeEqual, 0, jobYAML("with", 1, "1h", "prefer: [B]"))
	if got["with"] != "B:1" {
		t.Fatalf("benefit planner, prefer: %v", got)
	}
}

func TestFieldNoSplit(t *testing.T) {
	got := placeJobs(t, "optimal-easy", threeEqual, 0,
		jobYAML("with", 12, "1h", "no_split: true"), jobYAML("without", 12, "1h"))
	if !strings.HasPrefix(got["with"], "rejected") || !strings.Contains(got["without"], "+") {
		t.Fatalf("no_split: %v; want with rejected (no site has 12 nodes) and without split across sites", got)
	}
}

// Origin and data size: with slow links (1 MB/s) a 10 GB input stays at
// its origin; which origin decides the site, and without the size the
// first site wins the tie.
func TestFieldOrigin(t *testing.T) {
	got := placeJobs(t, "optimal-easy", threeEqual, 1e-6,
		jobYAML("fromB", 1, "1h", "origin: B", "data_size: 10GB"), jobYAML("fromC", 1, "1h", "origin: C", "data_size: 10GB"))
	if got["fromB"] != "B:1" || got["fromC"] != "C:1" {
		t.Fatalf("origin: %v; want each at its origin", got)
	}
}

func TestFieldDataSize(t *testing.T) {
	got := placeJobs(t, "optimal-easy", threeEqual, 1e-6,
		jobYAML("with", 1, "1h", "origin: C", "data_size: 10GB"), jobYAML("without", 1, "1h", "origin: C"))
	if got["with"] != "C:1" || got["without"] != "A:1" {
		t.Fatalf("data_size: %v; want with at its origin C and without on A (nothing to move: a tie)", got)
	}
	// The benefit planner prices the transfer too.
	got = placeJobs(t, "benefit", threeEqual, 1e-6, jobYAML("with", 1, "1h", "origin: C", "data_size: 10GB"))
	if got["with"] != "C:1" {
		t.Fatalf("benefit planner, data_size: %v", got)
	}
}

// A deadline no site can meet is refused at submission (any planner);
// best-effort accepts it; under the benefit planner a deadline that
// presses takes the fast site from a job without one.
func TestFieldDeadline(t *testing.T) {
	got := placeJobs(t, "optimal-easy", threeEqual, 0,
		jobYAML("with", 1, "2h", "deadline: +1h"), jobYAML("without", 1, "2h"),
		jobYAML("besteffort", 1, "2h", "deadline: +1h", "deadline_policy: best-effort"))
	if !strings.HasPrefix(got["with"], "refused") || !strings.Contains(got["with"], "deadline") || got["without"] != "A:1" || got["besteffort"] == "" || strings.HasPrefix(got["besteffort"], "refused") {
		t.Fatalf("deadline: %v", got)
	}
	fastSlow := []fieldSite{{"Fast", 1, 1}, {"Slow", 1, 1.5}}
	got = placeJobs(t, "benefit", fastSlow, 0, jobYAML("first", 1, "10m"), jobYAML("pressed", 1, "10m", "deadline: +14m"))
	if got["pressed"] != "Fast:1" || got["first"] != "Slow:1" {
		t.Fatalf("benefit planner, deadline: %v; want pressed on Fast", got)
	}
	got = placeJobs(t, "benefit", fastSlow, 0, jobYAML("first", 1, "10m"), jobYAML("pressed", 1, "10m"))
	if got["first"] != "Fast:1" {
		t.Fatalf("benefit planner, no deadline: %v; want first on Fast", got)
	}
}

// The benefit function ranks jobs by what they lose on their second-best
// site: an "urgent" step wins the fast site; without it the earlier job
// does.
func TestFieldBenefit(t *testing.T) {
	fastSlow := []fieldSite{{"Fast", 1, 1}, {"Slow", 1, 1.5}}
	got := placeJobs(t, "benefit", fastSlow, 0,
		jobYAML("first", 1, "10m", "deadline: +10h"),
		jobYAML("urgent", 1, "10m", "deadline: +10h", "benefit: {shape: step, a: 100, b: 0.02}"))
	if got["urgent"] != "Fast:1" || got["first"] != "Slow:1" {
		t.Fatalf("benefit: %v; want urgent on Fast", got)
	}
	got = placeJobs(t, "benefit", fastSlow, 0,
		jobYAML("first", 1, "10m", "deadline: +10h"),
		jobYAML("urgent", 1, "10m", "deadline: +10h"))
	if got["first"] != "Fast:1" {
		t.Fatalf("without benefit: %v; want first on Fast", got)
	}
	// The linear function of examples/reference.yaml: a steeper loss wins.
	got = placeJobs(t, "benefit", fastSlow, 0,
		jobYAML("cheap", 1, "10m", "deadline: +1h", "benefit: {a: 100, b: 0.1, c: 0.001}"),
		jobYAML("dear", 1, "10m", "deadline: +1h", "benefit: {a: 100, b: 0.1, c: 2.5}"))
	if got["dear"] != "Fast:1" {
		t.Fatalf("linear benefit: %v; want dear on Fast", got)
	}
}
