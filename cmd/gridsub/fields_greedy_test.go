package main

// The scheduling fields under the default live policy (broker.policy:
// greedy, which assemble.PlannerName makes greedy-local-easy): paper 000's
// Algorithm 3 looks only at the fastest sites that hold a job, so without
// the extras of coalloc.Greedy a one-site job would land on the first
// site whatever its prefer, origin or data_size say. Each test fails if
// the field is ignored.

import (
	"strings"
	"testing"

	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/internal/config"
)

// defaultLivePlanner is the planner a configuration without broker.policy
// gets.
func defaultLivePlanner(t *testing.T) string {
	t.Helper()
	src := "sites:\n  - {name: A, kind: sim, nodes: 4}\nbroker: {state_dir: " + t.TempDir() + "}\n"
	cfg, err := config.Parse("gridsub.yaml", []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	name := assemble.PlannerName(cfg.Broker.Policy)
	if name != "greedy-local-easy" {
		t.Fatalf("the default live policy is %q (broker.policy %q); these tests are written for greedy-local-easy", name, cfg.Broker.Policy)
	}
	return name
}

func TestFieldPreferDefaultPolicy(t *testing.T) {
	pl := defaultLivePlanner(t)
	for _, name := range []string{pl, "greedy-easy"} { // prefer holds for the paper's greedy too
		got := placeJobs(t, name, threeEqual, 0,
			jobYAML("with", 1, "1h", "prefer: [B]"), jobYAML("without", 1, "1h"))
		if got["with"] != "B:1" || got["without"] != "A:1" {
			t.Fatalf("%s, prefer: %v; want with on B:1 (a tie it wins) and without on A:1", name, got)
		}
	}
	// A tie only: a preferred site that would finish later loses.
	slowB := []fieldSite{{"A", 8, 1}, {"B", 8, 1.5}, {"C", 8, 1}}
	got := placeJobs(t, pl, slowB, 0, jobYAML("with", 1, "1h", "prefer: [B]"))
	if got["with"] != "A:1" {
		t.Fatalf("prefer of a slower site: %v; want A:1 (prefer wins ties, not at any price)", got)
	}
	// With the fastest site busy, the tie is between the next ones: the
	// window takes B, the preferred C wins.
	e := []fieldSite{{"A", 1, 1}, {"B", 8, 1.2}, {"C", 8, 1.2}}
	got = placeJobs(t, pl, e, 0, jobYAML("first", 1, "2h"), jobYAML("with", 1, "1h", "prefer: [C]"), jobYAML("without", 1, "1h"))
	if got["first"] != "A:1" || got["with"] != "C:1" || got["without"] != "B:1" {
		t.Fatalf("prefer with the fastest site busy: %v; want first on A, with on C, without on B", got)
	}
}

func TestFieldOriginDefaultPolicy(t *testing.T) {
	pl := defaultLivePlanner(t)
	got := placeJobs(t, pl, threeEqual, 1e-6,
		jobYAML("fromB", 1, "1h", "origin: B", "data_size: 10GB"), jobYAML("fromC", 1, "1h", "origin: C", "data_size: 10GB"))
	if got["fromB"] != "B:1" || got["fromC"] != "C:1" {
		t.Fatalf("%s, origin: %v; want each at its origin", pl, got)
	}
	// The paper's greedy-easy (the experiments) keeps Algorithm 3: the
	// fastest site, transfer or not. This is what the default differs in.
	got = placeJobs(t, "greedy-easy", threeEqual, 1e-6, jobYAML("fromC", 1, "1h", "origin: C", "data_size: 10GB"))
	if got["fromC"] != "A:1" {
		t.Fatalf("greedy-easy, origin: %v; want A:1 (Algorithm 3 as published)", got)
	}
}

func TestFieldDataSizeDefaultPolicy(t *testing.T) {
	pl := defaultLivePlanner(t)
	got := placeJobs(t, pl, threeEqual, 1e-6,
		jobYAML("with", 1, "1h", "origin: C", "data_size: 10GB"), jobYAML("without", 1, "1h", "origin: C"))
	if got["with"] != "C:1" || got["without"] != "A:1" {
		t.Fatalf("%s, data_size: %v; want with at its origin C and without on A (nothing to move: a tie)", pl, got)
	}
	// The size is weighed, not obeyed: a small input is worth moving to a
	// much faster site (10 MB at 1 MB/s: 10 s against half an hour).
	fastA := []fieldSite{{"A", 8, 0.5}, {"B", 8, 1}, {"C", 8, 1}}
	got = placeJobs(t, pl, fastA, 1e-6, jobYAML("small", 1, "1h", "origin: C", "data_size: 10MB"), jobYAML("big", 1, "1h", "origin: C", "data_size: 10GB"))
	if got["small"] != "A:1" || got["big"] != "C:1" {
		t.Fatalf("%s, data_size against speed: %v; want small on the fast A, big at its origin C", pl, got)
	}
}

// The fields the default policy already honoured keep working under it.
func TestFieldSitesNoSplitDefaultPolicy(t *testing.T) {
	pl := defaultLivePlanner(t)
	got := placeJobs(t, pl, threeEqual, 0, jobYAML("with", 1, "1h", "sites: [C]"), jobYAML("without", 1, "1h"))
	if got["with"] != "C:1" || got["without"] != "A:1" {
		t.Fatalf("%s, sites: %v", pl, got)
	}
	got = placeJobs(t, pl, threeEqual, 0, jobYAML("with", 12, "1h", "no_split: true"), jobYAML("without", 12, "1h"))
	if !strings.HasPrefix(got["with"], "rejected") || !strings.Contains(got["without"], "+") {
		t.Fatalf("%s, no_split: %v", pl, got)
	}
}
