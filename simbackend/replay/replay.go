package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/simbackend"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// Site is one simulated site.
type Site struct {
	Name  string
	Nodes int
	H     float64
}

// Job is one job of a workload.
type Job struct {
	ID       string
	Submit   time.Duration // from the start of the replay
	Width    int
	Estimate time.Duration // the user's estimate on the reference machine
	Runtime  time.Duration // actual run time on the reference machine (may exceed Estimate: killed)
	Origin   int           // submit site index, -1 = none
	Size     int64         // bytes to move to the executing sites
}

// Setup describes one replay.
type Setup struct {
	Sites     []Site
	Links     [][]policy.Link
	MultiSite float64
	Planner   policy.Planner
	Epoch     time.Time // virtual start (zero = 2000-01-01 UTC)
	Seed      uint64
	// Broker drives the replay through bridge.Broker and simbackend sites
	// instead of the direct driver (direct.go). Both give the same records;
	// the broker path is the reference the direct one is tested against,
	// and the only one for plans that replicate jobs (Sabin).
	Broker bool
	// Trust, when set, learns the sites' trust during the replay with the
	// trust policy the live broker's daemon uses (trust.go): each job that
	// ends counts as completed or failed (killed at its walltime) at the
	// sites it ran on, the counts age by TrustHalfLife of virtual time (0:
	// never), and before each planning pass the policy's scores are the
	// sites' Snapshot trust (Broker.SetTrust, as the daemon does). Such a
	// replay always takes the broker path. Nil: trust stays unset (1), as
	// in the papers' experiments.
	Trust         policy.Trust
	TrustHalfLife time.Duration
}

// Result is a replay's outcome.
type Result struct {
	Records    []simbackend.Record
	Summary    simbackend.Summary
	Cycles     int
	Unfinished int // jobs neither ended nor rejected when nothing was left to happen
	Failed     int // jobs that ended failed or timed out (killed at walltime)
}

// FromShaped converts a shaped SWF workload: submit times relative to the
// first job, estimate = requested time (the run time when missing).
func FromShaped(in []swf.Shaped) []Job {
	out := make([]Job, 0, len(in))
	var t0 int64
	if len(in) > 0 {
		t0 = in[0].Submit
	}
	for i := range in {
		out = append(out, fromShaped(t0, &in[i]))
	}
	return out
}

// fromShaped converts one shaped job; t0 is the workload's first submit time.
func fromShaped(t0 int64, s *swf.Shaped) Job {
	est := s.ReqTime
	if est <= 0 {
		est = s.Run
	}
	run := max(s.Run, 0)
	return Job{ID: strconv.FormatInt(s.ID, 10), Submit: time.Duration(s.Submit-t0) * time.Second, Width: int(s.Width),
		Estimate: time.Duration(max(est, 1)) * time.Second, Runtime: time.Duration(run) * time.Second,
		Origin: s.SubmitSite, Size: s.Size}
}

// Run replays jobs (sorted by Submit) on the setup. progress, when not nil,
// is called now and then with the number of jobs submitted so far.
func Run(ctx context.Context, s Setup, jobs []Job, progress func(submitted, total int)) (*Result, error) {
	return run(ctx, s, jobs, nil, progress)
}

// RunFeed is Run on a workload that is still being read (ReadFeed): the
// replay starts with the first batch, and reading and replaying share the
// machine's cores. The broker path (Setup.Broker, or a plan that
// replicates) reads the whole workload first.
func RunFeed(ctx context.Context, s Setup, f Feed, progress func(submitted, total int)) (*Result, error) {
	if f.Stop != nil {
		defer f.Stop()
	}
	return run(ctx, s, nil, &f, progress)
}

func run(ctx context.Context, s Setup, jobs []Job, f *Feed, progress func(submitted, total int)) (*Result, error) {
	epoch := s.Epoch
	if epoch.IsZero() {
		epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if !s.Broker && s.Trust == nil {
		res, read, err := direct(ctx, s, epoch, jobs, f, progress)
		if !errors.Is(err, errNeedsBroker) {
			return res, err
		}
		jobs = read
	}
	if f != nil {
		var err error
		if jobs, err = f.rest(ctx, jobs); err != nil {
			return nil, err
		}
	}
	return viaBroker(ctx, s, epoch, jobs, progress)
}

// viaBroker replays jobs through bridge.Broker on simbackend sites.
func viaBroker(ctx context.Context, s Setup, epoch time.Time, jobs []Job, progress func(submitted, total int)) (*Result, error) {
	eng := simbackend.NewEngine(epoch, s.Seed)
	var sites []bridge.SiteConfig
	caps := make([]simbackend.SiteCapacity, len(s.Sites))
	idx := map[string]int{}
	var b *bridge.Broker // the sites push their changes to it
	for i, st := range s.Sites {
		name := st.Name
		site, err := simbackend.NewSite(eng, simbackend.SiteConfig{Name: name, Nodes: st.Nodes, H: st.H, ForgetEnded: true,
			OnChange: func(js backends.JobStatus) { b.Notify(name, js) }})
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", st.Name, err)
		}
		sites = append(sites, bridge.SiteConfig{Name: st.Name, Backend: site, H: st.H, Simulated: true, Pushes: true})
		caps[i] = simbackend.SiteCapacity{Name: st.Name, Nodes: st.Nodes}
		idx[st.Name] = i
	}
	res := &Result{}
	var learn *trustLearner
	if s.Trust != nil {
		learn = newTrustLearner(s.Trust, s.TrustHalfLife, s.Sites)
	}
	// Each job's record is taken when it ends, and the broker forgets it
	// (Options.Drop): memory holds the live jobs, not the whole trace.
	recs := make([]simbackend.Record, len(jobs))
	ended := make([]bool, len(jobs))
	index := make(map[string]int, 1024) // grid id -> job, while the job lives
	drop := func(j *bridge.Job) {
		i, ok := index[j.ID]
		if !ok {
			return
		}
		delete(index, j.ID)
		r := simbackend.Record{ID: jobs[i].ID, Submit: j.Submit, Start: j.Start, End: j.End, Width: jobs[i].Width}
		switch j.State {
		case bridge.Rejected:
			r.Rejected = true
		case bridge.Completed, bridge.Failed, bridge.Timeout:
			if j.State != bridge.Completed {
				res.Failed++
			}
			for _, c := range j.Comps {
				r.Parts = append(r.Parts, simbackend.Part{Site: idx[c.Site], Nodes: c.Nodes})
				if learn != nil {
					learn.outcome(idx[c.Site], j.State == bridge.Completed, j.End)
				}
			}
		default:
			return // cancelled: never in a replay
		}
		recs[i], ended[i] = r, true
	}
	b, err := bridge.New(bridge.Options{Sites: sites, Planner: s.Planner, Links: s.Links, MultiSite: s.MultiSite,
		NoHistory: true, Store: &bridge.DiscardStore{}, Drop: drop})
	if err != nil {
		return nil, err
	}
	next := 0
	for {
		if next&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		t, ok := eng.Peek()
		if next < len(jobs) {
			st := epoch.Add(jobs[next].Submit)
			if !ok || st.Before(t) {
				t, ok = st, true
			}
		}
		if !ok {
			break
		}
		eng.RunUntil(t)
		for next < len(jobs) && !epoch.Add(jobs[next].Submit).After(t) {
			j := &jobs[next]
			req := bridge.Request{Name: "job-" + j.ID, Command: []string{"replay"}, Nodes: j.Width, Estimate: j.Estimate,
				DataSize: j.Size, Sim: backends.SimHints{Runtime: j.Runtime}}
			if j.Runtime == 0 {
				req.Sim.Runtime = time.Nanosecond // ran for no time; 0 would mean "runs its estimate"
			}
			if j.Origin >= 0 && j.Origin < len(s.Sites) {
				req.Origin = s.Sites[j.Origin].Name
			}
			bj, err := b.Submit(ctx, req, t)
			if err != nil {
				return nil, fmt.Errorf("job %s: %w", j.ID, err)
			}
			index[bj.ID] = next
			next++
			if progress != nil && next%1000 == 0 {
				progress(next, len(jobs))
			}
		}
		if learn != nil {
			scores, err := learn.scores(t)
			if err != nil {
				return nil, fmt.Errorf("trust policy %s: %w", s.Trust.Name(), err)
			}
			if scores != nil {
				b.SetTrust(scores)
			}
		}
		if _, err := b.Cycle(ctx, t); err != nil {
			return nil, err
		}
		res.Cycles++
	}
	if progress != nil {
		progress(next, len(jobs))
	}
	res.Records = make([]simbackend.Record, 0, len(jobs))
	for i := range jobs[:next] {
		if !ended[i] {
			res.Unfinished++
			continue
		}
		res.Records = append(res.Records, recs[i])
	}
	res.Unfinished += len(jobs) - next
	res.Summary = simbackend.Compute(res.Records, caps)
	return res, nil
}
