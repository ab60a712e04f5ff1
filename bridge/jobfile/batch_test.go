package jobfile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/policy"
)

func TestBatchFieldsParse(t *testing.T) {
	src := `name: gpu
command: [./train]
setup: |
  module load cuda/12
resources:
  nodes: 2
  cores_per_node: 8
  memory_per_node: 16GiB
  gpus_per_node: 2
  walltime: 1h
site_options:
  siteB: {partition: gpu, account: proj-42}
  siteA: {account: other}
`
	j, err := Parse("gpu.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if j.Resources.MemPerNode != 16<<30 || j.Resources.GPUsPerNode != 2 || j.Setup != "module load cuda/12\n" {
		t.Errorf("resources %+v, setup %q", j.Resources, j.Setup)
	}
	if j.SiteOptions["siteB"] != (SiteOptions{Partition: "gpu", Account: "proj-42"}) || j.SiteOptions["siteA"].Account != "other" {
		t.Errorf("site options %+v", j.SiteOptions)
	}
	sp := j.Spec("g1")
	if sp.MemPerNode != 16<<30 || sp.GPUsPerNode != 2 || sp.Setup == "" {
		t.Errorf("spec %+v", sp)
	}
	if err := j.CheckSites([]string{"siteB"}); err == nil || !strings.Contains(err.Error(), `site_options.siteA: unknown site "siteA"`) {
		t.Errorf("CheckSites: %v", err)
	}
	pj, err := j.PolicyJob("g1", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), func(string) (int, bool) { return 0, true })
	if err != nil || pj.PerNode != (policy.NodeShape{Cores: 8, MemBytes: 16 << 30, GPUs: 2}) {
		t.Errorf("policy job %+v, %v", pj.PerNode, err)
	}
}

// Every new field is bounded and a bad value is named at its line.
func TestBatchFieldsBounded(t *testing.T) {
	job := func(res, rest string) string {
		return "name: t\ncommand: [x]\nresources: {nodes: 1, walltime: 1h" + res + "}\n" + rest
	}
	cases := []struct{ name, src, field, text string }{
		{"bare memory", job(", memory_per_node: 4096", ""), "resources.memory_per_node", "no unit"},
		{"tiny memory", job(", memory_per_node: 10KiB", ""), "resources.memory_per_node", "less than 1MiB"},
		{"huge memory", job(", memory_per_node: 2000TiB", ""), "resources.memory_per_node", "more than 1PiB"},
		{"bad memory", job(", memory_per_node: lots", ""), "resources.memory_per_node", "cannot read"},
		{"gpus negative", job(", gpus_per_node: -1", ""), "resources.gpus_per_node", "0..1024"},
		{"gpus huge", job(", gpus_per_node: 5000", ""), "resources.gpus_per_node", "0..1024"},
		{"partition option", job("", "site_options: {A: {partition: --wrap=x}}\n"), "site_options.A.partition", "letters, digits"},
		{"account space", job("", "site_options: {A: {account: \"a b\"}}\n"), "site_options.A.account", "letters, digits"},
		{"unknown option", job("", "site_options: {A: {qos: x}}\n"), "", "unknown field `qos` in site_options.A"},
		{"options not a map", job("", "site_options: [A]\n"), "site_options", "mapping"},
		{"setup NUL", job("", "setup: \"a\\0b\"\n"), "setup", "NUL"},
	}
	for _, c := range cases {
		_, err := Parse("t.yaml", []byte(c.src))
		var list ErrorList
		if !errors.As(err, &list) {
			t.Errorf("%s: err = %v, want an ErrorList", c.name, err)
			continue
		}
		found := false
		for _, e := range list {
			if (e.Field == c.field || strings.HasPrefix(e.Field, c.field+".")) && strings.Contains(e.Msg, c.text) && e.Pos.Line > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %v; want %s: ...%s... at a line", c.name, err, c.field, c.text)
		}
	}
}
