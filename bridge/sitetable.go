package bridge

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/policy"
)

// siteTable is what the broker knows of its sites: their configuration and
// declared capabilities (the backends), their names and indices, the
// configured links and the multi-site factor, and what was last seen of
// each — size and node shape (known/seen, for feasibility and for a site
// that is down), node count (capacity, for reservations), trust, the
// cycle's Info answers (snapSites/infoOK/infoErr), the measured uplinks,
// and the outages of sites that stop answering (downSince/lostAt).
//
// The configuration is read-only after New. The observations are guarded
// by the ledger's lock, except the pushed changes (notes, stale), which
// have their own lock, notesMu, so that a backend can report from any
// goroutine.
type siteTable struct {
	sites     []SiteConfig
	siteIdx   map[string]int
	names     []string
	links     [][]policy.Link // Options.Links; nil = free
	multiSite float64         // Options.MultiSite
	polling   bool            // some site must be polled (does not push its changes)
	ids       Identities      // Options.Identities: per-user site identities (identity.go); nil = none
	self      string          // Options.Owner: the daemon's own user, whose jobs use the sites' backends

	capacity  []int         // nodes per site as last seen; 0 = not known yet
	trust     []float64     // per-site trust for the policy (SetTrust); 0 = unset
	known     []policy.Site // each site's size and node shape as last seen, for feasible (feasible.go)
	seen      []bool        // known[s] was filled from an Info
	snapSites []policy.Site // the sites of the cycle's snapshot, reused
	infoOK    []bool        // the cycle's Info of site s answered
	infoErr   []error
	offers    []siteOffer // the partitions or queues each site last reported (misconfig.go)
	uplinkBuf []policy.Link

	tiers       *TierOptions // Options.Tiers: outages count only with tiers on
	downSince   []time.Time  // per site: start of the current run of failed status calls (outage.go)
	lostAt      []time.Time  // per site: the last cycle a loss was reported (losses.go)
	backoffSeen []bool       // per site: its command budget was backing off at the last poll (stage_poll.go)

	notesMu    sync.Mutex
	notes      []note // pushed changes not yet applied
	spareNotes []note // the other buffer of notes
	stale      uint64 // bit s: pushing site s changed since its Info was read
}

func (st *siteTable) checkSites(field string, names []string) error {
	for _, n := range names {
		if _, ok := st.siteIdx[n]; !ok {
			return fmt.Errorf("%w: %s names %q; known sites: %s", ErrUnknownSite, field, n, strings.Join(st.names, ", "))
		}
	}
	return nil
}

// eachSite runs fn for every site: concurrently for real sites, in order for
// simulated ones (they answer at once, and order keeps replays deterministic).
func (st *siteTable) eachSite(fn func(s int)) {
	var wg sync.WaitGroup
	for s := range st.sites {
		if st.sites[s].Simulated {
			fn(s)
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); fn(s) }()
	}
	wg.Wait()
}

// uplinks is each site's measured transfer cost from this machine, for
// jobs submitted from no site, or nil when no site has measured anything.
// Measurements come from the sites' own transfers (backends.LinkEstimator).
func (st *siteTable) uplinks() []policy.Link {
	var out []policy.Link
	for s, sc := range st.sites {
		le, ok := backends.AsLinkEstimator(sc.Backend)
		if !ok {
			continue
		}
		spb, lat, ok := le.LinkEstimate()
		if !ok {
			continue
		}
		if out == nil {
			if cap(st.uplinkBuf) < len(st.sites) {
				st.uplinkBuf = make([]policy.Link, len(st.sites))
			}
			out = st.uplinkBuf[:len(st.sites)]
			clear(out)
		}
		out[s] = policy.Link{SecPerByte: spb, Latency: lat}
	}
	return out
}

// markStale notes that a pushing site's Info has changed.
func (st *siteTable) markStale(s int) {
	st.notesMu.Lock()
	st.stale |= 1 << uint(min(s, 63))
	st.notesMu.Unlock()
}

// policyJob is the policy's view of a queued job. The ledger's lock held.
func (st *siteTable) policyJob(j *Job) policy.Job {
	r := &j.Req
	pj := policy.Job{ID: j.ID, Width: r.Nodes, Estimate: r.Estimate, Submit: j.Submit, Origin: -1,
		DataSize: r.DataSize, Deadline: r.Deadline, NoSplit: r.NoSplit, BestEffort: r.DeadlinePolicy == DeadlineBestEffort}
	if r.Worth != nil {
		pj.Worth = *r.Worth
	}
	if r.Origin != "" {
		pj.Origin = st.siteIdx[r.Origin]
	}
	for _, n := range r.Sites {
		pj.Allowed = append(pj.Allowed, st.siteIdx[n])
	}
	for _, n := range r.Prefer {
		pj.Preferred = append(pj.Preferred, st.siteIdx[n])
	}
	pj.PerNode = policy.NodeShape{Cores: r.CoresPerNode, MemBytes: r.MemPerNode, GPUs: r.GPUsPerNode}
	if len(j.Refused) > 0 {
		pj.Allowed = pj.Allowed[:0]
		for _, n := range st.allowedLeft(j) {
			pj.Allowed = append(pj.Allowed, st.siteIdx[n])
		}
	}
	if len(j.Avoid) > 0 {
		pj.Allowed = st.avoiding(j, pj.Allowed)
	}
	return pj
}

// spec builds the JobSpec of component k of n of job j at a site. For
// simulated sites the walltime and the real run time include the predicted
// input transfer (the nodes are held while the data moves, as in paper 000).
func (st *siteTable) spec(j *Job, k, n int, site string, nodes int, opt policy.Option) *backends.JobSpec {
	r := &j.Req
	sim := st.sites[st.siteIdx[site]].Simulated
	sp := &backends.JobSpec{GridID: RemoteTag(j.ID, j.Attempts), Component: k, Components: n, Name: r.Name,
		Command: r.Command, Script: r.Script, WorkDir: r.WorkDir, Nodes: nodes, CoresPerNode: r.CoresPerNode,
		Inputs: r.Inputs, Outputs: r.Outputs, MemPerNode: r.MemPerNode, GPUsPerNode: r.GPUsPerNode, Setup: r.Setup,
		Partition: r.SiteOptions[site].Partition, Account: r.SiteOptions[site].Account}
	if !sim { // a simulated site runs no command: it never reads the environment
		sp.Env = make(map[string]string, len(r.Env)+3)
		for key, v := range r.Env {
			sp.Env[key] = v
		}
		sp.Env["GRIDSUB_JOB_ID"] = j.ID
		sp.Env["GRIDSUB_COMPONENT"] = strconv.Itoa(k)
		sp.Env["GRIDSUB_COMPONENTS"] = strconv.Itoa(n)
	}
	run := opt.Runtime
	if run <= 0 {
		run = r.Estimate
	}
	sp.Walltime = ceilSecond(run)
	if sim {
		wall, simRun := SimTimes(opt.Runtime, opt.Transfer, r.Estimate, r.Sim.Runtime)
		sp.Sim = backends.SimHints{Runtime: simRun, ExitCode: r.Sim.ExitCode}
		sp.Walltime = wall
	}
	return sp
}

// SimTimes is the walltime and the simulated run time the broker gives a
// simulated site for a job with the given estimate (on the reference
// machine) placed where the model predicts run (0 or less: the estimate)
// after a transfer of xfer: the input transfer counts inside the
// allocation, as in paper 000, and the job's actual run time on the
// reference machine (0 or less: the estimate; it may exceed the estimate,
// and the site then kills the job at its walltime) is scaled as the
// estimate is. Both are rounded up to the second, as batch systems take
// them. The trace replay's direct driver uses the same rule.
func SimTimes(run, xfer, estimate, actual time.Duration) (walltime, simRuntime time.Duration) {
	if run <= 0 {
		run = estimate
	}
	if actual <= 0 {
		actual = estimate
	}
	scale := float64(run) / float64(estimate)
	return ceilSecond(run + xfer), ceilSecond(time.Duration(math.Round(float64(actual)*scale)) + xfer)
}

func ceilSecond(d time.Duration) time.Duration {
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// takeNotes takes the changes the pushing sites reported since the last
// call. The notes are double-buffered: hand them back with spare once
// applied, and the next cycle's notes reuse their memory.
func (st *siteTable) takeNotes() []note {
	st.notesMu.Lock()
	defer st.notesMu.Unlock()
	notes := st.notes
	st.notes = st.spareNotes[:0]
	st.spareNotes = nil
	return notes
}

// spare hands back the notes takeNotes returned, once applied.
func (st *siteTable) spare(notes []note) {
	st.notesMu.Lock()
	st.spareNotes = notes[:0]
	st.notesMu.Unlock()
}

// avoiding narrows a job's allowed sites (nil: all) by Job.Avoid, unless
// that would leave none. The ledger's lock held.
func (st *siteTable) avoiding(j *Job, allowed []int) []int {
	var out []int
	for s := range st.sites {
		if (allowed == nil || slices.Contains(allowed, s)) && !slices.Contains(j.Avoid, st.sites[s].Name) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return allowed
	}
	return out
}

// model is what the broker knows of its sites for Feasible at now: each
// site's size and node shape as last seen when sizes is set (a site not
// seen yet, or every site without sizes, counts as not known), its h, the
// configured links and the multi-site factor. The ledger's lock held.
func (st *siteTable) model(now time.Time, sizes bool) *policy.Snapshot {
	m := &policy.Snapshot{Now: now, Links: st.links, MultiSite: st.multiSite, Sites: make([]policy.Site, len(st.sites))}
	for s := range st.sites {
		m.Sites[s] = policy.Site{Name: st.names[s], H: st.sites[s].H}
		if sizes && st.known != nil && st.seen[s] {
			m.Sites[s].Nodes, m.Sites[s].Shape = st.known[s].Nodes, st.known[s].Shape
		}
	}
	return m
}

// see records what a site's Info says of its size and node shape, for
// feasible. The ledger's lock held.
func (st *siteTable) see(s, nodes int, shape policy.NodeShape) {
	if st.known == nil {
		st.known = make([]policy.Site, len(st.sites))
		st.seen = make([]bool, len(st.sites))
		for i := range st.sites {
			st.known[i] = policy.Site{Name: st.names[i], H: st.sites[i].H}
		}
	}
	st.seen[s] = true
	st.known[s].Nodes, st.known[s].Shape = nodes, shape
}

// shapeAllowed is the sites a reservation may be bound to: its allowed
// sites (nil: all) less those whose nodes, as last seen, lack what it asks
// per node. Nil when nothing is left out (or everything would be: Submit's
// feasibility check refused that case; the sites' own answer decides).
// The ledger's lock held.
func (st *siteTable) shapeAllowed(j *Job) []string {
	ask := policy.NodeShape{Cores: j.Req.CoresPerNode, MemBytes: j.Req.MemPerNode, GPUs: j.Req.GPUsPerNode}
	if ask.Zero() || st.known == nil {
		return slices.Clone(j.Req.Sites)
	}
	names := j.Req.Sites
	if names == nil {
		names = st.names
	}
	var out []string
	for _, n := range names {
		s := st.siteIdx[n]
		if !st.seen[s] || st.known[s].Shape.Lacks(ask) == "" {
			out = append(out, n)
		}
	}
	if len(out) == 0 || len(out) == len(names) {
		return slices.Clone(j.Req.Sites)
	}
	return out
}

// noteLoss reports a site loss at site s to the Reliability model, at most
// once per site per cycle time (a site failure that loses ten jobs is one
// failure, not ten). A site already counted down (its status calls fail)
// is not reported again, nor are the losses found in its first answer after
// an outage (outageOver). The ledger's lock held.
func (st *siteTable) noteLoss(s int, status backends.JobStatus, now time.Time) {
	if st.tiers == nil || st.tiers.Reliability == nil || !IsSiteLoss(status) {
		return
	}
	if st.lostAt == nil {
		st.lostAt = make([]time.Time, len(st.sites))
	}
	if st.lostAt[s].Equal(now) || (st.downSince != nil && !st.downSince[s].IsZero()) {
		return
	}
	st.lostAt[s] = now
	st.tiers.Reliability.Lost(st.sites[s].Name, now)
}

// outageOver is called when site s answers after an outage: the jobs it
// reports lost in this answer were lost in the outage, already reported
// as the site going down, so no loss is reported for them. The ledger's lock held.
func (st *siteTable) outageOver(s int, now time.Time) {
	if st.lostAt == nil {
		st.lostAt = make([]time.Time, len(st.sites))
	}
	st.lostAt[s] = now
}

// outageGoesOn reports whether site s was already failing before this
// cycle (its failure was reported then). The ledger's lock held.
func (st *siteTable) outageGoesOn(s int, now time.Time) bool {
	return st.downSince != nil && !st.downSince[s].IsZero() && st.downSince[s].Before(now)
}

// allowedLeft lists the sites the job may still use: its allowed sites
// (all without a list) less those that refused it. The ledger's lock held.
func (st *siteTable) allowedLeft(j *Job) []string {
	names := j.Req.Sites
	if names == nil {
		names = st.names
	}
	var left []string
	for _, n := range names {
		if !slices.ContainsFunc(j.Refused, func(r Refusal) bool { return r.Site == n }) {
			left = append(left, n)
		}
	}
	return left
}

// siteNodes asks the sites that ask selects for their Info (the ledger's lock not held):
// each one's node count, or why it could not be had.
func (st *siteTable) siteNodes(ctx context.Context, ask func(s int) bool) ([]int, []error) {
	nodes := make([]int, len(st.sites))
	errs := make([]error, len(st.sites))
	st.eachSite(func(s int) {
		if !ask(s) {
			return
		}
		in, err := st.sites[s].Backend.Info(ctx)
		if err == nil && in == nil {
			err = fmt.Errorf("%w: no site info", backends.ErrBadOutput)
		}
		if err != nil {
			errs[s] = err
			return
		}
		nodes[s] = in.Nodes
	})
	return nodes, errs
}

// siteLinks is the site-to-site matrix of a snapshot. Data moves from site
// to site through the broker (relay), so where both sites' links to the
// broker are measured (up, from backends.LinkEstimator; downloads and
// uploads alike) the path i → j costs both legs in sequence: SecPerByte
// and Latency are the sums. Elsewhere the configured links (network:)
// stand. Without any measurement it is Options.Links itself.
func (st *siteTable) siteLinks(up []policy.Link) [][]policy.Link {
	measured := func(i int) bool { return i < len(up) && up[i].SecPerByte > 0 }
	n := 0
	for i := range up {
		if measured(i) {
			n++
		}
	}
	if n < 2 {
		return st.links
	}
	out := make([][]policy.Link, len(st.sites))
	for i := range out {
		out[i] = make([]policy.Link, len(st.sites))
		if st.links != nil {
			copy(out[i], st.links[i])
		}
		for j := range out[i] {
			if i != j && measured(i) && measured(j) {
				out[i][j] = policy.Link{SecPerByte: up[i].SecPerByte + up[j].SecPerByte, Latency: up[i].Latency + up[j].Latency}
			}
		}
	}
	return out
}

// downKeepsSize gives down site s its size and node shape as last seen (a
// site never seen keeps 0: unknown). The ledger's lock held.
func (st *siteTable) downKeepsSize(s int) {
	if st.seen != nil && st.seen[s] {
		st.snapSites[s].Nodes, st.snapSites[s].Shape = st.known[s].Nodes, st.known[s].Shape
	}
}

// remember hands each live remote job of j back to its site's backend
// with the tag and component it was submitted with (backends.Rememberer),
// so that a backend that keeps job directories only in memory still finds
// the exit-code file of a job that ended while the broker was stopped.
// Copies have tags of their own and are looked up by them instead. The
// ledger's lock held.
func (st *siteTable) remember(j *Job) {
	if hasCopies(j) {
		return
	}
	tag := RemoteTag(j.ID, j.Attempts)
	for k, c := range j.Comps {
		s, ok := st.siteIdx[c.Site]
		if !ok || c.RemoteID == "" || c.State.Final() {
			continue
		}
		be, err := st.backendFor(context.Background(), s, st.identityOwner(j))
		if err != nil {
			continue // the identity's backend, once built, reads the job's record from the site (StateLost without it)
		}
		if r, ok := backends.AsRememberer(be); ok {
			r.Remember(c.RemoteID, tag, k, len(j.Comps))
		}
	}
}
