package jobfile

import (
	"fmt"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// The job file's batch-system requests: what each node must have, a setup
// step, and per-site partition and account.

// memoryHint is what resources.memory_per_node accepts.
const memoryHint = `a size with a unit, like "4GiB", "512MiB" or "16GB"`

// nodeShape reads resources.memory_per_node and resources.gpus_per_node.
func (p *parser) nodeShape(f map[string]entry, j *Job) {
	if kv, ok := f["memory_per_node"]; ok {
		if v, ok := p.text(kv.val, "resources.memory_per_node", memoryHint); ok {
			n, err := ParseSize(v)
			switch {
			case err != nil:
				p.fail(kv.val, "resources.memory_per_node", ErrValue, "%v", err)
			case unitOf(v) == "":
				// Batch systems disagree on a bare number (SLURM: MiB, PBS: bytes).
				p.fail(kv.val, "resources.memory_per_node", ErrValue, "%q has no unit; want %s", v, memoryHint)
			case n < 1<<20:
				p.fail(kv.val, "resources.memory_per_node", ErrValue, "%q is less than 1MiB; want %s", v, memoryHint)
			case n > jobrules.MaxMemPerNode:
				p.fail(kv.val, "resources.memory_per_node", ErrValue, "%q is more than 1PiB; want %s", v, memoryHint)
			default:
				j.Resources.MemPerNode = n
			}
		}
	}
	if kv, ok := f["gpus_per_node"]; ok {
		if v, ok := p.integer(kv.val, "resources.gpus_per_node", 0, jobrules.MaxGPUsPerNode, fmt.Sprintf("a whole number 0..%d", jobrules.MaxGPUsPerNode)); ok {
			j.Resources.GPUsPerNode = v
		}
	}
}

// unitOf is the lower-case unit of a size ("" for a bare number).
func unitOf(s string) string {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == '-' || s[i] == '+' || s[i] == '_' || s[i] == ' ') {
		i++
	}
	u := s[i:]
	b := []byte(u)
	for k, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[k] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// batchOptions reads setup and site_options.
func (p *parser) batchOptions(f map[string]entry, j *Job) {
	if e, ok := f["setup"]; ok {
		if s, ok := p.text(e.val, "setup", "bash commands run before the command (use `setup: |` for several lines)"); ok {
			if p.rule(e.val, "setup", jobrules.Setup(s)) {
				j.Setup = s
			}
		}
	}
	e, ok := f["site_options"]
	if !ok || !p.mapping(e.val, "site_options", "a mapping of site names to {partition, account}, like {siteB: {partition: compute}}") {
		return
	}
	sites := p.fields(e.val, "site_options", nil)
	if len(sites) > jobrules.MaxSiteOptions {
		p.fail(e.val, "site_options", ErrValue, "has %d sites; at most %d", len(sites), jobrules.MaxSiteOptions)
		return
	}
	j.SiteOptions = make(map[string]SiteOptions, len(sites))
	for name, kv := range sites {
		field := "site_options." + name
		p.pos[field] = posOf(kv.key)
		if !p.mapping(kv.val, field, "a mapping with partition and account") {
			continue
		}
		of := p.fields(kv.val, field, []string{"partition", "account"})
		var o SiteOptions
		for _, k := range []string{"partition", "account"} {
			x, ok := of[k]
			if !ok {
				continue
			}
			v, ok := p.text(x.val, field+"."+k, "a partition, queue or account name")
			if !ok || !p.rule(x.val, field+"."+k, jobrules.BatchName(v)) {
				continue
			}
			if k == "partition" {
				o.Partition = v
			} else {
				o.Account = v
			}
		}
		j.SiteOptions[name] = o
	}
}
