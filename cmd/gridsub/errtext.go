package main

import (
	"errors"
	"regexp"
	"strings"
	"sync"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// requestFields are the broker's names for a request's fields (Go's, as
// bridge.FieldError reports them) and the job file's names for them, which
// are the ones a user knows.
var requestFields = map[string]string{
	"Name": "name", "Command": "command", "Script": "script", "Env": "env", "WorkDir": "workdir",
	"Nodes": "resources.nodes", "CoresPerNode": "resources.cores_per_node", "MemPerNode": "resources.mem_per_node",
	"GPUsPerNode": "resources.gpus_per_node", "Setup": "setup", "Estimate": "resources.walltime",
	"Inputs": "inputs", "SiteInputs": "inputs", "Outputs": "outputs", "Origin": "scheduling.origin",
	"DataSize": "scheduling.data_size", "Sites": "scheduling.sites", "Prefer": "scheduling.prefer",
	"NoSplit": "scheduling.no_split", "Deadline": "scheduling.deadline", "QoS": "scheduling.qos",
	"DeadlinePolicy": "scheduling.deadline_policy", "Worth": "scheduling.benefit", "Sim": "simulate",
	"OutputDir": "the output directory (--out-dir)", "Window": "scheduling.window", "Array": "array", "Sweep": "sweep",
	"Steps": "steps", "After": "after", "AfterOK": "afterok", "AfterAny": "afterany", "SiteOptions": "site_options",
	// Inside inputs and steps.
	"Local": "local", "Remote": "remote", "Mode": "mode", "Site": "site", "Path": "path", "Size": "size",
	"Earliest": "earliest_start", "Latest": "latest_end",
}

// fieldPathRe is a field path as bridge.FieldError writes it at the start
// of a problem: "AfterOK[0]: ", "Inputs[2].Local: ", "Steps[1].Nodes: ".
var fieldPathRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(^|; |: )([A-Z][A-Za-z]*(?:\[\d+\])?(?:\.[A-Z][A-Za-z]*(?:\[\d+\])?)*): `)
})

// fieldSegRe is one segment of such a path.
var fieldSegRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Z][A-Za-z]*)(\[\d+\])?$`) })

// sentence is how an error reaches the user: the daemon's answer as its
// message alone (not "gridsub daemon: ... (HTTP 400 bad_request)": the
// exit status says what kind of failure it was), without the "bad request:"
// the broker prefixes to a refused request, and with the job file's names
// for the fields it names (afterok[0], resources.nodes) instead of the
// broker's Go names (AfterOK[0], Nodes).
func sentence(err error) string {
	msg := err.Error()
	var ae *api.Error
	if errors.As(err, &ae) {
		msg = strings.Replace(msg, ae.Error(), ae.Msg, 1)
	}
	msg = strings.ReplaceAll(msg, bridge.ErrBadRequest.Error()+": ", "")
	return fieldPathRe().ReplaceAllStringFunc(msg, func(m string) string {
		sub := fieldPathRe().FindStringSubmatch(m)
		segs := strings.Split(sub[2], ".")
		for i, s := range segs {
			p := fieldSegRe().FindStringSubmatch(s)
			name, ok := requestFields[p[1]]
			if !ok {
				return m // not a request's field: leave the text alone
			}
			segs[i] = name + p[2]
		}
		return sub[1] + strings.Join(segs, ".") + ": "
	})
}
