package jobfile

import (
	"os"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// Request is the broker request of the job, submitted at now, its outputs
// fetched to outDir ("" = none; bridge.IDPlaceholder is the job's id). A
// pipeline is one request whose Steps are the steps' requests (the broker
// makes each a job of its own). The inputs staged from this machine are
// measured (os.Stat) for the request's DataSize.
func (j *Job) Request(now time.Time, outDir string) (bridge.Request, error) {
	if j.IsPipeline() {
		r := bridge.Request{Name: j.Name, OutputDir: outDir, After: j.After, AfterOK: j.AfterOK, AfterAny: j.AfterAny}
		for _, st := range j.Steps {
			sr, err := st.Request(now, "")
			if err != nil {
				return bridge.Request{}, err
			}
			r.Steps = append(r.Steps, sr)
		}
		return r, nil
	}
	t, err := j.Resolve(now)
	if err != nil {
		return bridge.Request{}, err
	}
	spec := j.Spec("")
	s := j.Scheduling
	s.Origin, s.DataSize = j.DataOrigin() // inputs that lie at a site set both
	if s.Origin == "" && s.DataSize == 0 {
		// From this machine: what moves is the staged inputs. The policies
		// price it with each site's measured link (backends.LinkEstimator).
		for _, in := range spec.Inputs {
			if fi, err := os.Stat(in.Local); err == nil {
				s.DataSize += fi.Size()
			}
		}
	}
	var win *bridge.Window
	if !t.EarliestStart.IsZero() {
		win = &bridge.Window{Earliest: t.EarliestStart, Latest: t.LatestEnd}
	}
	var sweep *bridge.Sweep
	if j.Sweep != nil {
		sweep = &bridge.Sweep{Limit: j.Sweep.Limit}
		for _, p := range j.Sweep.Params {
			sweep.Params = append(sweep.Params, bridge.SweepParam{Name: p.Name, Values: p.Values})
		}
	}
	var opts map[string]bridge.SiteOptions
	if len(j.SiteOptions) > 0 {
		opts = make(map[string]bridge.SiteOptions, len(j.SiteOptions))
		for k, o := range j.SiteOptions {
			opts[k] = bridge.SiteOptions{Partition: o.Partition, Account: o.Account}
		}
	}
	req := bridge.Request{
		Window: win,
		Name:   j.Name, Command: spec.Command, Script: spec.Script, Env: spec.Env, WorkDir: spec.WorkDir,
		Nodes: spec.Nodes, CoresPerNode: spec.CoresPerNode, Estimate: spec.Walltime,
		Inputs: spec.Inputs, Outputs: spec.Outputs,
		Origin: s.Origin, DataSize: s.DataSize, Sites: s.Sites, Prefer: s.Prefer, NoSplit: s.NoSplit,
		Deadline: t.Deadline, QoS: string(s.QoS), Sim: spec.Sim, OutputDir: outDir,
		Array: j.Array, Sweep: sweep, After: j.After, AfterOK: j.AfterOK, AfterAny: j.AfterAny,
		MemPerNode: spec.MemPerNode, GPUsPerNode: spec.GPUsPerNode, Setup: spec.Setup, SiteOptions: opts,
	}
	req.Worth, req.DeadlinePolicy = s.Benefit.Worth(), s.DeadlinePolicy
	req.SiteInputs = j.SiteFiles()
	return req, nil
}
