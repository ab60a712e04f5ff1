// Package configs embeds the site configurations shipped with gridsub, so the
// binary runs without any file next to it:
//
//	local.yaml            the default: one site, "local", running each job as
//	                      real processes on this machine, one slot per core
//	testbed.yaml          paper 000's testbed: Beijing 128, Shanghai 64, Harbin 32
//	                      nodes, all simulated, small heterogeneity (h = 1.0)
//	testbed-large-h.yaml  the same with large heterogeneity (h = 1.4, 1.0, 0.6)
//	sim-pair.yaml         two small simulated sites (32 + 24 nodes), so a 48-node
//	                      job such as examples/wide.yaml must be co-allocated
//	local-slurm.yaml      the two real SLURM sites of the local testbed
//	                      (siteA 8 x 2 CPUs, siteB 4 x 4 CPUs); every address,
//	                      port, key and directory comes from the environment the
//	                      testbed's testbed.env exports
//	local-pbs.yaml        the real OpenPBS site of the local testbed
//	                      (scripts/pbs-testbed.sh; ../shared/testbed/openpbs),
//	                      likewise from its testbed.env
//	grid50.yaml           50 simulated sites served over SSH on loopback
//	                      (25 SLURM-, 25 PBS-dialect, 4-512 nodes, h 0.5-2.0);
//	                      start them with scripts/grid50.sh (docs/simsite.md)
//
// internal/config reads and validates them; this package only holds the bytes.
package configs

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

// Default is the name of the configuration used when none is given.
const Default = "local.yaml"

//go:embed *.yaml
var files embed.FS

// FS is the embedded configuration files (top level only).
var FS fs.FS = files

// Read returns the embedded file name ("testbed.yaml"); the ".yaml" suffix
// may be left out.
func Read(name string) ([]byte, error) {
	if !strings.HasSuffix(name, ".yaml") {
		name += ".yaml"
	}
	return files.ReadFile(name)
}

// Names lists the embedded configuration files, sorted.
func Names() []string {
	entries, _ := files.ReadDir(".")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}
