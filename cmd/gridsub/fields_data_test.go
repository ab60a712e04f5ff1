package main

import (
	"strings"
	"testing"
)

// dataJob is a 1-node job of the given walltime whose input lies at site
// (an inputs entry with site:, path: and size:); site "" means no such
// input.
func dataJob(name, walltime, site, size string) string {
	s := "name: " + name + "\ncommand: [cat, big.dat]\nresources: {nodes: 1, walltime: " + walltime + "}\n"
	if site != "" {
		s += "inputs:\n  - {site: " + site + ", path: data/big.dat, size: " + size + "}\n"
	}
	return s
}

// The data location (inputs with site:) is a scheduling field: the job
// goes where its data lies unless another site wins by more than moving
// the data costs. Links are 1 MB/s between sites (1e-6 s/B).
func TestFieldInputsAtSite(t *testing.T) {
	// Equal sites: the data's site wins; without the input, the tie goes to A.
	got := placeJobs(t, "optimal-easy", threeEqual, 1e-6,
		dataJob("atC", "1h", "C", "10GB"), dataJob("atB", "1h", "B", "10GB"), dataJob("without", "1h", "", ""))
	if got["atC"] != "C:1" || got["atB"] != "B:1" || got["without"] != "A:1" {
		t.Fatalf("inputs at a site: %v; want atC on C:1, atB on B:1 and without on A:1", got)
	}
	// C is twice as slow (2h instead of 1h): 1 GB (1000 s to move) loses
	// to the 1h that A saves, 10 GB (10000 s) does not.
	slowC := []fieldSite{{"A", 8, 1}, {"B", 8, 1}, {"C", 8, 2}}
	got = placeJobs(t, "optimal-easy", slowC, 1e-6,
		dataJob("small", "1h", "C", "1GB"), dataJob("big", "1h", "C", "10GB"))
	if got["small"] != "A:1" || got["big"] != "C:1" {
		t.Fatalf("inputs at slow C: %v; want small moved to A:1 (transfer 17m < 1h saved) and big kept on C:1 (2h47m > 1h)", got)
	}
	// The benefit planner prices the transfer too.
	got = placeJobs(t, "benefit", threeEqual, 1e-6, dataJob("atC", "1h", "C", "10GB"))
	if got["atC"] != "C:1" {
		t.Fatalf("benefit planner, inputs at C: %v", got)
	}
	// An unknown site is refused at submission, naming the field.
	got = placeJobs(t, "optimal-easy", threeEqual, 1e-6, dataJob("nowhere", "1h", "D", "1GB"))
	if !strings.HasPrefix(got["nowhere"], "refused") || !strings.Contains(got["nowhere"], `SiteInputs[0].Site: unknown site "D"`) {
		t.Fatalf("unknown site: %v", got)
	}
}

// The dry run says where the data lies and what moving it costs
// (examples/data-at-site.yaml on the default testbed: 1 MB/s, 575 ms).
func TestDryRunShowsDataLocation(t *testing.T) {
	code, stdout, stderr := gridsub(t, "--dry-run", "examples/data-at-site.yaml")
	want := "data at Shanghai: 2 GiB; in place at Shanghai; 35m48s to Beijing at 999.7 kB/s"
	if code != 0 || !strings.Contains(stdout, "would start  Shanghai:8") || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d; want Shanghai and %q\n%s\n%s", code, want, stdout, stderr)
	}
}
