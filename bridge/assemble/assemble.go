package assemble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/plugins/policyrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/dependable"
	"github.com/gridsub/gridsub/policy/registry"
	"github.com/gridsub/gridsub/simbackend"
)

// ErrConfig is wrapped by every error about the configuration's content.
var ErrConfig = errors.New("configuration")

// SiteSpec is one site to build.
type SiteSpec struct {
	Name         string
	Kind         string // "sim", "slurm" or "pbs"
	Nodes        int
	CoresPerNode int
	MemPerNode   int64 // bytes; simulated sites model it (0 = not modelled)
	GPUsPerNode  int   // simulated sites model it (0 = none)
	H            float64
	Area         string // local area, read by the trust-min-min planner
	// Backend is how the catalog builds the site's backend
	// (bridge/plugins.Build): the built-in of its Builtin in process,
	// isolated, or an external plugin. nil builds the built-in of Kind in
	// process from the fields above (a simulated site on the broker's
	// engine). Its Config names the same site.
	Backend *plugins.BackendSpec
	// Open, when set, builds the backend instead of the catalog: a
	// backend the caller makes itself (a test's fake site). It returns the
	// backend and what to close at the end.
	Open func(ctx context.Context) (backends.Backend, io.Closer, error)
}

// backendSpec is the catalog's description of the site.
func (s *SiteSpec) backendSpec() (plugins.BackendSpec, error) {
	if s.Backend == nil {
		return plugins.BackendSpec{Builtin: s.Kind, Config: plugins.BackendConfig{Name: s.Name, Kind: s.Kind, Nodes: s.Nodes,
			CoresPerNode: s.CoresPerNode, H: s.H, MemPerNode: s.MemPerNode, GPUsPerNode: s.GPUsPerNode}}, nil
	}
	if s.Backend.Config.Name != s.Name {
		return plugins.BackendSpec{}, fmt.Errorf("%w: site %s: its backend is configured for site %q", ErrConfig, s.Name, s.Backend.Config.Name)
	}
	return *s.Backend, nil
}

// Spec is everything Build needs.
type Spec struct {
	Sites     []SiteSpec
	Links     [][]policy.Link
	MultiSite float64
	Planner   string        // a planner name (PlannerName: "" = greedy-local-easy), or a planner plugin (plannerrpc.ParseRef)
	TimeScale float64       // virtual seconds per wall second for simulated sites (0 = 60)
	Seed      uint64        // seed of the simulated testbed
	Interval  time.Duration // cycle interval on real sites (0 = 1s)
	Epoch     time.Time     // simulated start time (zero = now, rounded to the second)
	Store     bridge.Store
	IDPrefix  string // see bridge.Options.IDPrefix
	// Users and Owner: per-user limits and the daemon's own user
	// (bridge.Options.Users, Owner).
	Users map[string]bridge.UserLimits
	Owner string
	// Credentials, when set, are the users' own identities at the sites
	// (users.Credentials): a user's jobs at a site where they have one are
	// submitted, polled, cancelled, found and fetched over an SSH
	// connection of their own (bridge.Options.Identities). nil: every job
	// uses its site's configured login.
	Credentials CredentialBook
	// FairShareHalfLife is the decay of the queue order's use
	// (Policies.Order; bridge.Options).
	FairShareHalfLife time.Duration
	// OutputRoot and InputRoots confine where outputs are written and
	// inputs read (bridge.Options.OutputRoot, InputRoots).
	OutputRoot string
	InputRoots []string
	// OffLimits are directories no job may read or write
	// (bridge.Options.OffLimits): the daemon's state directory.
	OffLimits []string
	// FetchWorkers and FetchTimeout bound output fetching (staging.*; see
	// bridge.Options); 0 = the bridge's defaults.
	FetchWorkers int
	FetchTimeout time.Duration
	// PlannerSHA256 is the checksum of a planner plugin executable
	// (broker.policy_sha256); FallbackPlanner the built-in that replaces a
	// planner plugin that keeps failing ("" = DefaultFallback);
	// PlannerTimeout bounds one planning call to it (0 =
	// DefaultPlannerTimeout).
	PlannerSHA256   string
	FallbackPlanner string
	PlannerTimeout  time.Duration
	// Tiers tunes the dependability tiers, which every assembled broker
	// runs (bridge.Options.Tiers). Without a Reliability model Build
	// gives the broker paper 004's, learned live and kept in Store
	// (reliability.go).
	Tiers bridge.TierOptions
	// Remap turns on moves of jobs waiting in a site's queue
	// (bridge.Options.Remap, broker.remap); nil: off.
	Remap *bridge.RemapOptions

	// Policies names the policy of each extension point beside the
	// planner (policies.go): a built-in ("" = the kind's default) or a
	// policy plugin (NAME | plugin:/path ARGS | plugin:builtin:NAME).
	// PolicySHA256 is the checksum of each plugin:/path executable, by
	// kind (plugins.KindTrust, ...). A policy plugin's calls are bounded
	// by PlannerTimeout too, and a plugin that fails for good hands over
	// to its kind's default built-in.
	Policies     PolicyNames
	PolicySHA256 map[string]string
}

// Options are knobs of the caller, not of the configuration.
type Options struct {
	Logger  *slog.Logger
	OnEvent func(*bridge.Job, bridge.Event)
	// OnPlugin, when set, is told what the plugins' supervision did
	// (restarts, the planner's and the policy plugins' fallbacks, a
	// backend plugin down). It must not block.
	OnPlugin func(PluginEvent)
}

// Env is an assembled broker with its sites.
type Env struct {
	Broker  *bridge.Broker
	Engine  *simbackend.Engine // nil when no site is simulated
	Sites   []SiteSpec
	spec    Spec
	closers []io.Closer
	log     *slog.Logger
	planner *plannerPlugin // nil when the planner runs in process
	// policies are the policy plugins started beside the planner.
	policies *PolicyPluginSet
	// rel is the availability model (reliability.go); relSaved the
	// rel.Changed() last saved to the store.
	rel      *dependable.Live
	relSaved uint64
}

// SubmitGrace is how long a live broker on real sites keeps looking for a
// dispatch intent's tag after a restart before it counts the submission
// as never made (bridge.Options.SubmitGrace). A minute covers a submit
// command still running at a site when the broker was killed (the kill
// test on SSH-served sites saw them land within a second or two).
const SubmitGrace = time.Minute

// Build assembles the broker. Simulated and real sites cannot be mixed in one
// broker (a virtual clock cannot wait for a real batch system).
func Build(ctx context.Context, spec Spec, opts Options) (*Env, error) {
	if len(spec.Sites) == 0 {
		return nil, fmt.Errorf("%w: no sites", ErrConfig)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	env := &Env{Sites: spec.Sites, spec: spec, log: log}
	nsim := 0
	for _, s := range spec.Sites {
		if s.Kind == "sim" {
			nsim++
		}
	}
	if nsim > 0 && nsim < len(spec.Sites) {
		return nil, fmt.Errorf("%w: %d simulated and %d real sites in one configuration; use one kind per configuration", ErrConfig, nsim, len(spec.Sites)-nsim)
	}
	if nsim > 0 {
		epoch := spec.Epoch
		if epoch.IsZero() {
			epoch = time.Now().UTC().Truncate(time.Second)
		}
		env.Engine = simbackend.NewEngine(epoch, spec.Seed)
	}
	var sites []bridge.SiteConfig
	for _, s := range spec.Sites {
		var (
			be  backends.Backend
			c   io.Closer
			err error
		)
		if s.Open != nil {
			if be, c, err = s.Open(ctx); err != nil {
				err = fmt.Errorf("site %s: %w", s.Name, err)
			}
		} else {
			be, c, err = buildSite(ctx, &s, env.Engine, opts.OnPlugin)
		}
		if err != nil {
			env.Close()
			return nil, err
		}
		if c != nil {
			env.closers = append(env.closers, c)
		}
		sites = append(sites, bridge.SiteConfig{Name: s.Name, Backend: be, H: s.H, Simulated: s.Kind == "sim"})
	}
	policies, pc, err := spec.Policies.Open(ctx, PolicyPlugins{SHA256: spec.PolicySHA256, Fallback: true, OnEvent: opts.OnPlugin, // policy_plugins.go
		Base: policyrpc.Config{CallTimeout: spec.PlannerTimeout, Env: pluginEnv(), Logger: log, Gridsub: gridsubExecutable()}})
	if err != nil {
		env.Close()
		return nil, err
	}
	env.policies = pc.(*PolicyPluginSet)
	env.closers = append(env.closers, pc)
	planner, pp, err := buildPlanner(ctx, spec, log, opts.OnPlugin)
	if err != nil {
		env.Close()
		return nil, err
	}
	if pp != nil {
		env.planner = pp
		env.closers = append(env.closers, pp.p)
	}
	tiers := spec.Tiers
	if tiers.Reliability == nil {
		names := make([]string, len(spec.Sites))
		for i, s := range spec.Sites {
			names[i] = s.Name
		}
		if env.rel, env.relSaved, err = buildReliability(ctx, spec.Store, names, env.Now, log); err != nil {
			env.Close()
			return nil, err
		}
		tiers.Reliability = env.rel
	}
	grace := SubmitGrace // real sites: a submit sent before a crash may land after the restart's look-up
	if env.Engine != nil {
		grace = 0 // in-process simulated sites die with the broker: nothing is in flight
	}
	var ids bridge.Identities
	if spec.Credentials != nil {
		bySite := map[string]*SiteSpec{}
		for i := range env.Sites {
			bySite[env.Sites[i].Name] = &env.Sites[i]
		}
		id := newIdentities(spec.Credentials, bySite, func(ctx context.Context, s *SiteSpec) (backends.Backend, io.Closer, error) {
			return buildSite(ctx, s, env.Engine, opts.OnPlugin)
		})
		ids = id
		env.closers = append(env.closers, id)
	}
	b, err := bridge.New(bridge.Options{Sites: sites, Planner: planner, Store: spec.Store, IDPrefix: spec.IDPrefix, Links: spec.Links, SubmitGrace: grace,
		MultiSite: spec.MultiSite, Logger: log, OnEvent: opts.OnEvent, BindLead: BindLead,
		OutputRoot: spec.OutputRoot, InputRoots: spec.InputRoots, OffLimits: spec.OffLimits,
		FetchWorkers: spec.FetchWorkers, FetchTimeout: spec.FetchTimeout, CheckFeasible: true, Tiers: &tiers, Remap: spec.Remap,
		Policies: policies, Users: spec.Users, Owner: spec.Owner, Identities: ids, FairShareHalfLife: spec.FairShareHalfLife})
	if err != nil {
		env.Close()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	env.Broker = b
	return env, nil
}

// buildSite builds a site's backend through the catalog: in process (a
// simulated site on the broker's engine), or isolated or external behind a
// supervisor whose events reach onPlugin. Its errors name the site; one
// about the site's description wraps ErrConfig.
func buildSite(ctx context.Context, s *SiteSpec, engine *simbackend.Engine, onPlugin func(PluginEvent)) (backends.Backend, io.Closer, error) {
	spec, err := s.backendSpec()
	if err != nil {
		return nil, nil, err
	}
	opts := plugins.BuildOptions{Engine: engine}
	if onPlugin != nil {
		opts.OnEvent = func(site, kind, detail string) { onPlugin(PluginEvent{Plugin: site, Kind: kind, Detail: detail}) }
	}
	be, c, err := plugins.Build(ctx, spec, opts)
	if err != nil && (errors.Is(err, plugins.ErrUnknownPlugin) || errors.Is(err, backends.ErrInvalidSpec)) {
		err = fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return be, c, err
}

// BindLead is how long before its window an advance reservation is bound
// and created at its site: enough for the native command to land before
// the window opens.
const BindLead = 30 * time.Second

// Unreachable is the sites whose connection is down now, with why
// (backends.Connectivity): a real site that could not be reached at start
// is built anyway and used once it answers.
func (e *Env) Unreachable() map[string]error {
	out := map[string]error{}
	for _, name := range e.Broker.SiteNames() {
		be, _ := e.Broker.Site(name)
		if c, ok := backends.AsConnectivity(be); ok {
			if err := c.ConnErr(); err != nil {
				out[name] = err
			}
		}
	}
	return out
}

// PlannerPlugin lists the broker's planner plugin; ok is false when the
// planner runs in process.
func (e *Env) PlannerPlugin() (l plugins.Listing, ok bool) {
	if e.planner == nil {
		return l, false
	}
	return e.planner.listing(), true
}

// PolicyPlugins lists the policy plugins beside the planner (feasibility,
// admission, trust, tiering, remap, order) that the broker runs out of process,
// in that order; none when every one is a built-in in process.
func (e *Env) PolicyPlugins() []plugins.Listing {
	if e.policies == nil {
		return nil
	}
	return e.policies.Listings()
}

// ConfiguredPolicies is what the configuration chose for each policy
// kind, by kind (plugins.KindPlacement, KindFeasibility, ...): the
// built-in's name (the kind's default when none was named) or the plugin
// reference; the remap policy is marked "(off)" when remapping is.
func (e *Env) ConfiguredPolicies() map[string]string {
	n := e.spec.Policies
	out := map[string]string{plugins.KindPlacement: PlannerName(e.spec.Planner)}
	for kind, name := range map[string]string{plugins.KindFeasibility: n.Feasibility, plugins.KindAdmission: n.Admission,
		plugins.KindTrust: n.Trust, plugins.KindTiering: n.Tiering, plugins.KindRemap: n.Remap, plugins.KindOrder: n.Order} {
		if name == "" {
			name = registry.Default(policy.Kind(kind))
		}
		out[kind] = name
	}
	if e.spec.Remap == nil {
		out[plugins.KindRemap] += " (off)" // broker.remap.enabled is false: no pass runs
	}
	return out
}

// Close releases the sites' connections and stops the planner and policy
// plugins.
func (e *Env) Close() error {
	var errs []error
	for _, c := range e.closers {
		errs = append(errs, c.Close())
	}
	e.closers = nil
	return errors.Join(errs...)
}

// Simulated reports whether the sites are simulated.
func (e *Env) Simulated() bool { return e.Engine != nil }

// Now is the broker's current time: virtual for simulated sites.
func (e *Env) Now() time.Time {
	if e.Engine != nil {
		return e.Engine.Now()
	}
	return time.Now()
}

// Describe says in one line what the job runs on.
func (e *Env) Describe() string {
	var parts []string
	for _, s := range e.Sites {
		parts = append(parts, fmt.Sprintf("%s %d", s.Name, s.Nodes))
	}
	kind := "real sites"
	if e.Engine != nil {
		kind = "the simulated testbed"
	}
	return fmt.Sprintf("%s (%s)", kind, strings.Join(parts, ", "))
}

// Clock paces the cycles of a command that follows jobs.
type Clock interface {
	Now() time.Time
	// Tick waits until the next cycle is due. j, when not nil, is the job being
	// followed; a simulated clock uses its predicted end to pick its pace.
	Tick(j *bridge.Job)
}

// Clock returns the pacing for this environment. scale overrides the
// configured time scale of simulated sites (0 = configured).
func (e *Env) Clock(scale float64) Clock {
	if e.Engine == nil {
		iv := e.spec.Interval
		if iv <= 0 {
			iv = time.Second
		}
		return wallClock{iv}
	}
	base := e.spec.TimeScale
	if scale > 0 {
		base = scale
	}
	if base <= 0 {
		base = 60
	}
	return &simClock{e: e.Engine, base: base, fixed: scale > 0, tick: 50 * time.Millisecond}
}

type wallClock struct{ iv time.Duration }

func (wallClock) Now() time.Time     { return time.Now() }
func (w wallClock) Tick(*bridge.Job) { time.Sleep(w.iv) }

// simClock advances the engine in scaled wall time. Unless the scale was
// fixed by the user it speeds up so that a followed job's predicted end is
// reached within about two seconds of wall time: a demo should not take as
// long as the job it simulates.
type simClock struct {
	e     *simbackend.Engine
	base  float64
	fixed bool
	tick  time.Duration
}

// targetWall is how long the rest of a followed job may take in wall time.
const targetWall = 2 * time.Second

func (c *simClock) Now() time.Time { return c.e.Now() }

func (c *simClock) Scale(j *bridge.Job) float64 {
	s := c.base
	if c.fixed || j == nil {
		return s
	}
	end := j.Predicted.End()
	if j.Predicted.Parts == nil {
		if j.Resv == nil {
			return s
		}
		end = j.Resv.Earliest.Add(j.Req.Estimate) // waiting for its reservation window
	}
	left := end.Sub(c.e.Now())
	if left < time.Second {
		left = time.Second
	}
	return max(s, float64(left)/float64(targetWall))
}

func (c *simClock) Tick(j *bridge.Job) {
	time.Sleep(c.tick)
	step := time.Duration(c.Scale(j) * float64(c.tick))
	c.e.RunUntil(c.e.Now().Add(step))
}

// PlannerName normalises a configured policy name: a bare selection
// ("greedy", "optimal", "single-site", "non-adaptive") gets EASY
// backfilling, the paper's recommended combination; "" and bare "greedy"
// (the live default) mean greedy-local-easy, paper 000's greedy that also
// weighs the site where a job's data is (coalloc.Options.Local), so a job
// file's origin and data_size count; the experiments name greedy-easy.
func PlannerName(n string) string {
	switch n {
	case "", "greedy":
		return "greedy-local-easy"
	case "optimal", "single-site", "non-adaptive":
		return n + "-easy"
	}
	return n
}
