package jobfile

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// Arrays, sweeps, pipelines and dependencies in a job file.
//
//	array: "1-100%10"        # one element per index (SLURM syntax), at most 10 at once;
//	                         # each sees its index in GRIDSUB_ARRAY_INDEX
//	sweep:                   # one element per combination of the values (cartesian
//	  limit: 4               # product, the last parameter varying fastest), at most 4
//	  params:                # at once; each element has every parameter in its
//	    LR: ["0.1", "0.01"]  # environment, and its position (0-based) in
//	    DEPTH: [2, 4, 8]     # GRIDSUB_ARRAY_INDEX
//	afterok: [g000041]       # held by the broker until g000041 completed
//	after: [g000040]         # ... until g000040 started
//	afterany: [g000039]      # ... until g000039 ended, however
//
// A pipeline file has name and steps (and optionally after, afterok,
// afterany for the whole pipeline); each step is a job (the fields of a job
// file) whose after/afterok/afterany may name earlier steps by their name:
//
//	name: pipe
//	steps:
//	  - {name: prep, command: [...], resources: {...}}
//	  - {name: run, afterok: [prep], command: [...], resources: {...}}

var (
	groupFields    = []string{"array", "sweep", "after", "afterok", "afterany"}
	sweepFields    = []string{"params", "limit"}
	pipelineFields = []string{"name", "steps", "after", "afterok", "afterany"}
)

// Sweep is a parameter sweep (see Job.Sweep).
type Sweep struct {
	Params []SweepParam // in the order the file gives them
	Limit  int          // at most this many elements at once; 0 = no limit
}

// SweepParam is one swept environment variable and its values.
type SweepParam struct {
	Name   string
	Values []string
}

// IsPipeline reports whether the job is a pipeline (Steps set).
func (j *Job) IsPipeline() bool { return len(j.Steps) > 0 }

// isPipelineFile reports whether a job file's root mapping has a steps key.
func isPipelineFile(root *yaml.Node) bool {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := deref(root.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == "steps" {
			return true
		}
	}
	return false
}

// groupAndDeps reads array, sweep, after, afterok and afterany of a job.
func (p *parser) groupAndDeps(f map[string]entry, j *Job) {
	p.deps(f, j)
	arr, hasArr := f["array"]
	sw, hasSweep := f["sweep"]
	if hasArr && hasSweep {
		p.fail(sw.key, "sweep", ErrConflict, "give array or sweep, not both (array at line %d)", arr.key.Line)
		return
	}
	if hasArr {
		if s, ok := p.text(arr.val, "array", `an array spec like "1-100%10"`); ok {
			if p.rule(arr.val, "array", firstErr(jobrules.ParseArray(s))) {
				j.Array = strings.TrimSpace(s)
			}
		}
		if j.Scheduling.Reservation != nil {
			p.fail(arr.key, "array", ErrConflict, "an array cannot ask for scheduling.reservation")
		}
	}
	if hasSweep && p.mapping(sw.val, "sweep", "a mapping with params (and limit)") {
		sf := p.fields(sw.val, "sweep", sweepFields)
		s := &Sweep{}
		if kv, ok := sf["limit"]; ok {
			if v, ok := p.integer(kv.val, "sweep.limit", 1, jobrules.MaxElements, fmt.Sprintf("a whole number from 1 to %d", jobrules.MaxElements)); ok {
				s.Limit = v
			}
		}
		kv, ok := sf["params"]
		if !ok {
			p.fail(sw.key, "sweep.params", ErrRequired, `missing; give the swept variables and their values, like params: {LR: ["0.1", "0.01"]}`)
			return
		}
		if !p.mapping(kv.val, "sweep.params", `a mapping of variable names to lists of values, like {LR: ["0.1", "0.01"]}`) {
			return
		}
		n := kv.val
		var sizes []int
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := deref(n.Content[i]), deref(n.Content[i+1])
			if k == nil || v == nil || k.Kind != yaml.ScalarNode {
				continue
			}
			field := "sweep.params." + k.Value
			if !p.rule(k, field, jobrules.EnvName(k.Value)) {
				continue
			}
			if _, clash := j.Env[k.Value]; clash {
				p.fail(k, field, ErrConflict, "%s is also set in env; a swept variable takes its values from the sweep", k.Value)
				continue
			}
			if p.pos[field] != (Pos{}) {
				p.fail(k, field, ErrSyntax, "duplicate parameter")
				continue
			}
			p.pos[field] = posOf(v)
			vals, nodes, ok := p.strs(v, field, "values")
			if !ok {
				continue
			}
			if len(vals) == 0 {
				p.fail(v, field, ErrRequired, "has no values")
				continue
			}
			for i, s := range vals {
				p.rule(nodes[i], fmt.Sprintf("%s[%d]", field, i), jobrules.EnvValue(s))
			}
			if d := jobrules.UniqueStrings(vals); d != "" {
				p.fail(v, field, ErrValue, "%q is given twice", d)
				continue
			}
			s.Params = append(s.Params, SweepParam{Name: k.Value, Values: vals})
			sizes = append(sizes, len(vals))
		}
		if _, err := jobrules.SweepSize(sizes); err != nil {
			p.fail(kv.val, "sweep.params", ErrValue, "%s", err.Error())
			return
		}
		if j.Scheduling.Reservation != nil {
			p.fail(sw.key, "sweep", ErrConflict, "a sweep cannot ask for scheduling.reservation")
		}
		j.Sweep = s
	}
}

func firstErr(_ jobrules.Array, err error) error { return err }

// deps reads after, afterok and afterany: lists of job ids (or, in a
// pipeline's step, names of earlier steps).
func (p *parser) deps(f map[string]entry, j *Job) {
	for _, d := range []struct {
		key string
		dst *[]string
	}{{"after", &j.After}, {"afterok", &j.AfterOK}, {"afterany", &j.AfterAny}} {
		e, ok := f[d.key]
		if !ok {
			continue
		}
		ids, nodes, ok := p.strs(e.val, d.key, "job ids (or, in a pipeline, names of earlier steps)")
		if !ok {
			continue
		}
		if len(ids) > jobrules.MaxDeps {
			p.fail(e.val, d.key, ErrValue, "has %d entries; at most %d", len(ids), jobrules.MaxDeps)
			continue
		}
		for i, s := range ids {
			if s == "" || strings.ContainsAny(s, " \t\n/") || len(s) > jobrules.MaxNameLen {
				p.fail(nodes[i], fmt.Sprintf("%s[%d]", d.key, i), ErrValue, "%q is not a job id or step name", s)
			}
		}
		if dup := jobrules.UniqueStrings(ids); dup != "" {
			p.fail(e.val, d.key, ErrValue, "%q is given twice", dup)
		}
		*d.dst = ids
	}
}

// pipeline reads a pipeline file: name, steps, and the pipeline's own
// dependencies. Each step is parsed as a job file of its own; its errors
// are reported with their lines and a "steps[i]." field prefix.
func (p *parser) pipeline(root *yaml.Node, j *Job) {
	f := p.fields(root, "", pipelineFields)
	if e, ok := f["name"]; ok {
		if s, ok := p.text(e.val, "name", "a pipeline name"); ok {
			p.rule(e.val, "name", jobrules.Name(s))
			j.Name = s
		}
	} else {
		p.failAt(posOf(root), "name", ErrRequired, "missing; give the pipeline a name (e.g. name: pipe)")
	}
	p.deps(f, j)
	e := f["steps"]
	if e.val.Kind != yaml.SequenceNode || len(e.val.Content) == 0 {
		p.fail(e.val, "steps", ErrType, "must be a list of steps (each a job with a name), got %s", describe(e.val))
		return
	}
	if len(e.val.Content) > jobrules.MaxSteps {
		p.fail(e.val, "steps", ErrValue, "has %d steps; at most %d", len(e.val.Content), jobrules.MaxSteps)
		return
	}
	names := map[string]int{}
	for i, n := range e.val.Content {
		n = deref(n)
		prefix := fmt.Sprintf("steps[%d]", i)
		if n == nil || n.Kind != yaml.MappingNode {
			p.fail(e.val, prefix, ErrType, "a step is a mapping of job fields (name, command, resources, ...)")
			continue
		}
		sp := &parser{file: p.file, pos: map[string]Pos{}}
		st := &Job{Scheduling: Scheduling{QoS: QoSAuto}}
		sp.job(n, st)
		for _, fe := range sp.errs {
			c := *fe
			c.Field = join(prefix, c.Field)
			p.errs = append(p.errs, &c)
		}
		st.file, st.pos = p.file, sp.pos
		if st.Array != "" || st.Sweep != nil {
			p.fail(n, prefix, ErrConflict, "a pipeline step cannot be an array or a sweep")
		}
		if st.Scheduling.Reservation != nil {
			p.fail(n, prefix+".scheduling.reservation", ErrConflict, "a pipeline step cannot ask for a reservation window")
		}
		if st.Name != "" {
			if err := jobrules.StepName(st.Name); err != nil {
				p.fail(n, prefix+".name", ErrValue, "%s", err.Error())
			} else if prev, dup := names[st.Name]; dup {
				p.fail(n, prefix+".name", ErrValue, "step %q is also steps[%d]; step names must be unique", st.Name, prev)
			}
		}
		for _, list := range [][]string{st.After, st.AfterOK, st.AfterAny} {
			for _, ref := range list {
				if ref == st.Name {
					p.fail(n, prefix, ErrValue, "step %q depends on itself", ref)
				}
				for k := i + 1; k < len(e.val.Content); k++ {
					if later := deref(e.val.Content[k]); later != nil && stepName(later) == ref {
						p.fail(n, prefix, ErrValue, "depends on step %q, which comes later; a step may depend only on the steps before it", ref)
					}
				}
			}
		}
		names[st.Name] = i
		j.Steps = append(j.Steps, st)
	}
}

// stepName is the name field of a step's mapping, or "".
func stepName(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := deref(n.Content[i]), deref(n.Content[i+1]); k != nil && v != nil && k.Value == "name" && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}
