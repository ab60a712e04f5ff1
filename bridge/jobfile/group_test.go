package jobfile

import (
	"errors"
	"strings"
	"testing"
)

const groupBase = "name: g\ncommand: [/bin/true]\nresources: {nodes: 1, walltime: 1m}\n"

func TestGroupFields(t *testing.T) {
	j, err := Parse("a.yaml", []byte(groupBase+`array: "1-100%10"
afterok: [g000001, g000002]
after: g000003
`))
	if err != nil {
		t.Fatal(err)
	}
	if j.Array != "1-100%10" || len(j.AfterOK) != 2 || j.After[0] != "g000003" {
		t.Fatalf("%+v", j)
	}
	j, err = Parse("s.yaml", []byte(groupBase+`sweep:
  limit: 4
  params:
    ZETA: [a, b]
    ALPHA: [1, 2, 3]
`))
	if err != nil {
		t.Fatal(err)
	}
	if s := j.Sweep; s.Limit != 4 || len(s.Params) != 2 || s.Params[0].Name != "ZETA" || s.Params[1].Values[2] != "3" {
		t.Fatalf("sweep %+v (the file's order must be kept)", j.Sweep)
	}
	j, err = Parse("p.yaml", []byte(`name: p
afterany: [g000009]
steps:
  - {name: one, command: [/bin/true], resources: {nodes: 1, walltime: 1m}}
  - {name: two, afterok: [one], command: [/bin/true], resources: {nodes: 1, walltime: 1m}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !j.IsPipeline() || len(j.Steps) != 2 || j.Steps[1].AfterOK[0] != "one" || j.AfterAny[0] != "g000009" {
		t.Fatalf("pipeline %+v", j)
	}
}

func TestGroupErrors(t *testing.T) {
	for _, c := range []struct {
		text, field, want string
		line              int
	}{
		{groupBase + "array: \"1-20000\"\n", "array", "more than 10000", 4},
		{groupBase + "array: \"x\"\n", "array", "not an index", 4},
		{groupBase + "array: \"1-3\"\nsweep: {params: {A: [1]}}\n", "sweep", "not both", 5},
		{groupBase + "sweep: {params: {GRIDSUB_X: [1]}}\n", "sweep.params.GRIDSUB_X", "reserved", 4},
		{groupBase + "sweep: {params: {A: [1, 1]}}\n", "sweep.params.A", "twice", 4},
		{groupBase + "sweep: {limit: 3}\n", "sweep.params", "missing", 4},
		{groupBase + "env: {A: x}\nsweep: {params: {A: [1]}}\n", "sweep.params.A", "also set in env", 5},
		{groupBase + "afterok: [\"a b\"]\n", "afterok[0]", "not a job id", 4},
		{groupBase + "after: [g1, g1]\n", "after", "twice", 4},
		{"name: p\nsteps:\n  - {name: a, afterok: [b], command: [x], resources: {nodes: 1, walltime: 1m}}\n  - {name: b, command: [x], resources: {nodes: 1, walltime: 1m}}\n", "steps[0]", "comes later", 3},
		{"name: p\nsteps:\n  - {name: a, command: [x], resources: {nodes: 1, walltime: 1m}}\n  - {name: a, command: [x], resources: {nodes: 1, walltime: 1m}}\n", "steps[1].name", "unique", 4},
		{"name: p\nsteps:\n  - {name: a, command: [x], resources: {nodes: 0, walltime: 1m}}\n", "steps[0].resources.nodes", ">= 1", 3},
		{"name: p\nsteps:\n  - {name: a, array: \"1-2\", command: [x], resources: {nodes: 1, walltime: 1m}}\n", "steps[0]", "cannot be an array", 3},
		{"name: p\nsteps: []\n", "steps", "list of steps", 2},
		{"name: p\ncommand: [x]\nsteps:\n  - {name: a, command: [x], resources: {nodes: 1, walltime: 1m}}\n", "", "unknown field `command`", 2},
	} {
		_, err := Parse("f.yaml", []byte(c.text))
		var list ErrorList
		if !errors.As(err, &list) {
			t.Errorf("%q: got %v, want an ErrorList", c.text, err)
			continue
		}
		found := false
		for _, fe := range list {
			if fe.Field == c.field && strings.Contains(fe.Msg, c.want) && fe.Pos.Line == c.line {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: want %s at line %d with %q, got %v", c.text, c.field, c.line, c.want, err)
		}
	}
}
