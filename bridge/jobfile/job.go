package jobfile

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/jobrules"
	"github.com/gridsub/gridsub/policy"
)

// Job is a parsed, validated job file. Paths are as the file gives them,
// except Input.Local after Load, which is resolved against the job file's
// directory.
type Job struct {
	Name    string            // [A-Za-z0-9][A-Za-z0-9._-]{0,63}
	Command []string          // argv; exactly one of Command and Script is set
	Script  string            // bash script body
	Args    []string          // appended to Command (only with Command)
	Setup   string            // bash run before the command, in its shell (module load ...); "" = none
	Env     map[string]string // environment of the job
	WorkDir string            // relative to the job directory; "" = the job directory
	Inputs  []Input           // files staged into the job directory
	Outputs []string          // relative paths fetched back; a trailing "/" marks a directory
	// SiteInputs are inputs that already lie at a site (sitefile.go).
	SiteInputs []SiteInput

	Resources Resources
	// SiteOptions are batch options per site name (partition or queue,
	// account); a site not listed uses its configured defaults.
	SiteOptions map[string]SiteOptions
	Scheduling  Scheduling
	Simulate    Simulate

	// Groups and dependencies (group.go): at most one of Array, Sweep and
	// Steps; a pipeline (Steps) has only Name and dependencies besides.
	Array    string   // array spec, "1-100%10" (jobrules.ParseArray)
	Sweep    *Sweep   // parameter sweep
	Steps    []*Job   // pipeline steps, in order
	After    []string // job ids (in a step: also earlier step names) that must have started
	AfterOK  []string // ... that must have completed
	AfterAny []string // ... that must have ended

	file string         // file name as given, for error messages
	dir  string         // directory of the job file ("" after Parse)
	pos  map[string]Pos // field path -> position of its value
}

// Input is one file staged into the job directory before the job runs.
type Input struct {
	Local  string      // path on this machine; relative to the job file's directory in the file, resolved by Load
	Remote string      // path relative to the job directory (default: the base name of Local)
	Mode   fs.FileMode // file mode at the site; 0 = 0644
}

// Resources is what the job asks each run for.
type Resources struct {
	Nodes        int           // width: nodes in total, possibly split across sites (>= 1)
	CoresPerNode int           // 0 = the site's default
	MemPerNode   int64         // bytes per node; 0 = the site's default
	GPUsPerNode  int           // GPUs per node; 0 = none
	Walltime     time.Duration // the user's estimate on the reference machine (T_origin), > 0
}

// SiteOptions are the batch options of one site.
type SiteOptions struct {
	Partition string // SLURM partition or PBS queue; "" = the site's configured one
	Account   string // account to charge; "" = the site's configured one
}

// QoS is the dependability tier asked for (SPEC.md §5).
type QoS string

// QoS tiers. Auto derives the tier from the deadline (SPEC.md §5): high when
// the deadline is tight, low when it is loose, none without a deadline.
const (
	QoSAuto QoS = "auto" // the broker picks from the deadline
	QoSHigh QoS = "high" // replication: two copies start at once, first success wins
	QoSLow  QoS = "low"  // primary-backup
	QoSNone QoS = "none" // retry after a failure
)

// QoSTiers lists the valid values of scheduling.qos.
var QoSTiers = []QoS{QoSAuto, QoSHigh, QoSLow, QoSNone}

// Scheduling holds the hints and constraints the policies read.
type Scheduling struct {
	Origin      string       // submit site; "" = outside every site
	DataSize    int64        // bytes to move from Origin to the executing sites
	Sites       []string     // allowed sites; nil = all
	Prefer      []string     // preferred sites (win ties)
	NoSplit     bool         // forbid co-allocation across sites
	Deadline    TimeSpec     // latest acceptable end; zero = none
	QoS         QoS          // never "" after Parse (default QoSAuto)
	Benefit     *Benefit     // benefit function (SPEC.md §4); needs Deadline
	Reservation *Reservation // advance reservation window (SPEC.md §2)
	// DeadlinePolicy is "strict" (the default, "") or "best-effort": what
	// happens to a job no site can finish by its deadline. Needs Deadline.
	DeadlinePolicy string
}

// Benefit is the linear benefit function of SPEC.md §4: the job is worth A
// when it completes before B·D (D = the deadline, measured from submission),
// and loses C per second after that.
type Benefit struct {
	// Shape is BenefitLinear (the default) or BenefitStep ("urgent":
	// worth A before B·D, A − C after; C defaults to A).
	Shape   string
	A, B, C float64
}

// Benefit function shapes.
const (
	BenefitLinear = "linear"
	BenefitStep   = "step"
)

// Value is the benefit of completing elapsed after submission when the
// deadline is deadline after submission: A if elapsed < B·deadline, else
// A − C·(elapsed − B·deadline) in seconds. It may be negative.
func (b *Benefit) Value(elapsed, deadline time.Duration) float64 {
	limit := b.B * deadline.Seconds()
	t := elapsed.Seconds()
	if t < limit {
		return b.A
	}
	if b.Shape == BenefitStep {
		return b.A - b.C
	}
	return b.A - b.C*(t-limit)
}

// Reservation is an advance-reservation request (SPEC.md §2): the job must
// run for its walltime inside the window [EarliestStart, LatestEnd]. The file
// gives latest_end, or flexibility, or neither (a window exactly as long as
// the walltime); Parse always fills LatestEnd, computing it from flexibility
// as EarliestStart + walltime/(1 − flexibility). Times.Flexibility has the
// resolved value.
type Reservation struct {
	EarliestStart TimeSpec
	LatestEnd     TimeSpec
}

// Simulate says how the job behaves on a simulated site. Real sites ignore it.
type Simulate struct {
	Runtime  time.Duration // actual run time on the reference machine; 0 = the walltime
	ExitCode int           // 0..255
}

// File is the file name the job was parsed from.
func (j *Job) File() string { return j.file }

// Dir is the directory of the job file after Load ("" after Parse).
func (j *Job) Dir() string { return j.dir }

// Pos returns the position of the value of a field path such as
// "resources.nodes" or "scheduling.sites[1]".
func (j *Job) Pos(field string) (Pos, bool) {
	p, ok := j.pos[field]
	return p, ok
}

// Argv is Command followed by Args (nil for a script job).
func (j *Job) Argv() []string {
	if len(j.Command) == 0 {
		return nil
	}
	return append(slices.Clone(j.Command), j.Args...)
}

// SimRuntime is the simulated actual run time: Simulate.Runtime, or the
// walltime when it is not given.
func (j *Job) SimRuntime() time.Duration {
	if j.Simulate.Runtime > 0 {
		return j.Simulate.Runtime
	}
	return j.Resources.Walltime
}

// Spec is the JobSpec for running the whole job at one site, unscaled: the
// broker sets Nodes, Walltime and Sim.Runtime per site (scaled by h) and
// Component/Components for co-allocated parts.
func (j *Job) Spec(gridID string) backends.JobSpec {
	s := backends.JobSpec{
		GridID:       gridID,
		Components:   1,
		Name:         j.Name,
		Command:      j.Argv(),
		Script:       j.Script,
		Env:          maps.Clone(j.Env),
		WorkDir:      j.WorkDir,
		Nodes:        j.Resources.Nodes,
		CoresPerNode: j.Resources.CoresPerNode,
		MemPerNode:   j.Resources.MemPerNode,
		GPUsPerNode:  j.Resources.GPUsPerNode,
		Setup:        j.Setup,
		Walltime:     j.Resources.Walltime,
		Outputs:      slices.Clone(j.Outputs),
		Sim:          backends.SimHints{Runtime: j.SimRuntime(), ExitCode: j.Simulate.ExitCode},
	}
	for _, in := range j.Inputs {
		s.Inputs = append(s.Inputs, backends.StageFile{Local: in.Local, Remote: in.Remote, Mode: in.Mode})
	}
	return s
}

// Times are a job's times resolved against its submission time.
type Times struct {
	Submit        time.Time
	Deadline      time.Time // zero = none
	EarliestStart time.Time // zero = no reservation
	LatestEnd     time.Time // zero = no reservation
	// Flexibility = (window − walltime)/window of the reservation window
	// (SPEC.md §2); 0 without a reservation.
	Flexibility float64
}

// Resolve turns relative times into absolute ones given the submission time
// and checks what can only be checked then: the deadline and the reservation
// window are not in the past, and the window holds the walltime. It never
// reads the clock. Errors are an ErrorList wrapping ErrTime.
func (j *Job) Resolve(submit time.Time) (Times, error) {
	t := Times{Submit: submit, Deadline: j.Scheduling.Deadline.At(submit)}
	var errs ErrorList
	if !t.Deadline.IsZero() && !t.Deadline.After(submit) {
		errs = append(errs, j.errAt("scheduling.deadline", ErrTime,
			fmt.Sprintf("deadline %s is not after the submission time %s", t.Deadline.Format(time.RFC3339), submit.Format(time.RFC3339))))
	} else if !t.Deadline.IsZero() {
		errs = j.horizon(errs, "scheduling.deadline", t.Deadline, submit)
	}
	if r := j.Scheduling.Reservation; r != nil {
		t.EarliestStart = r.EarliestStart.At(submit)
		t.LatestEnd = r.LatestEnd.At(submit)
		if w := t.LatestEnd.Sub(t.EarliestStart); w > 0 && w >= j.Resources.Walltime {
			t.Flexibility = float64(w-j.Resources.Walltime) / float64(w)
		}
		switch {
		case t.EarliestStart.Before(submit):
			errs = append(errs, j.errAt("scheduling.reservation.earliest_start", ErrTime,
				fmt.Sprintf("earliest start %s is before the submission time %s", t.EarliestStart.Format(time.RFC3339), submit.Format(time.RFC3339))))
		case t.LatestEnd.After(submit.Add(jobrules.MaxHorizon)):
			errs = j.horizon(errs, "scheduling.reservation.latest_end", t.LatestEnd, submit)
		case t.LatestEnd.Sub(t.EarliestStart) < j.Resources.Walltime:
			errs = append(errs, j.errAt("scheduling.reservation.latest_end", ErrTime,
				fmt.Sprintf("window %s .. %s (%s) is shorter than resources.walltime %s", t.EarliestStart.Format(time.RFC3339),
					t.LatestEnd.Format(time.RFC3339), t.LatestEnd.Sub(t.EarliestStart), j.Resources.Walltime)))
		}
	}
	return t, errs.asError()
}

// horizon adds an ErrTime error when t is further after submit than
// jobrules.MaxHorizon (10 years): the same limit Submit applies.
func (j *Job) horizon(errs ErrorList, field string, t, submit time.Time) ErrorList {
	if err := jobrules.Time(t, submit); err != nil {
		errs = append(errs, j.errAt(field, ErrTime, err.Error()))
	}
	return errs
}

// PolicyJob is the job as a policy sees it (policy.Job), given its grid id,
// the submission time and a lookup from site name to index in the snapshot.
// It fails (ErrUnknownSite, ErrTime) where CheckSites or Resolve would.
func (j *Job) PolicyJob(id string, submit time.Time, siteIndex func(name string) (int, bool)) (policy.Job, error) {
	times, err := j.Resolve(submit)
	if err != nil {
		return policy.Job{}, err
	}
	pj := policy.Job{
		ID:       id,
		Width:    j.Resources.Nodes,
		Estimate: j.Resources.Walltime,
		Submit:   submit,
		Origin:   -1,
		DataSize: j.Scheduling.DataSize,
		Deadline: times.Deadline,
		NoSplit:  j.Scheduling.NoSplit,
		PerNode:  policy.NodeShape{Cores: j.Resources.CoresPerNode, MemBytes: j.Resources.MemPerNode, GPUs: j.Resources.GPUsPerNode},
	}
	var errs ErrorList
	index := func(field, name string) int {
		i, ok := siteIndex(name)
		if !ok {
			errs = append(errs, j.errAt(field, ErrUnknownSite, fmt.Sprintf("unknown site %q", name)))
			return -1
		}
		return i
	}
	if o := j.Scheduling.Origin; o != "" {
		pj.Origin = index("scheduling.origin", o)
	}
	if len(j.SiteInputs) > 0 { // sitefile.go: the data lies there
		pj.Origin, pj.DataSize = index(j.SiteInputs[0].field+".site", j.SiteInputs[0].Site), j.SiteDataSize()
	}
	for k, s := range j.Scheduling.Sites {
		pj.Allowed = append(pj.Allowed, index(fmt.Sprintf("scheduling.sites[%d]", k), s))
	}
	for k, s := range j.Scheduling.Prefer {
		pj.Preferred = append(pj.Preferred, index(fmt.Sprintf("scheduling.prefer[%d]", k), s))
	}
	if err := errs.asError(); err != nil {
		return policy.Job{}, err
	}
	return pj, nil
}

// CheckSites reports every site name in scheduling.origin, scheduling.sites
// and scheduling.prefer that is not in known, each with its line and the list
// of known sites. Names compare exactly (site names are case-sensitive).
func (j *Job) CheckSites(known []string) error {
	var errs ErrorList
	check := func(field, name string) {
		if slices.Contains(known, name) {
			return
		}
		msg := fmt.Sprintf("unknown site %q (known sites: %s)", name, strings.Join(known, ", "))
		if len(known) == 0 {
			msg = fmt.Sprintf("unknown site %q (no sites are configured)", name)
		}
		if s := Suggest(name, known); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		errs = append(errs, j.errAt(field, ErrUnknownSite, msg))
	}
	if o := j.Scheduling.Origin; o != "" {
		check("scheduling.origin", o)
	}
	for _, in := range j.SiteInputs {
		check(in.field+".site", in.Site)
	}
	for k, s := range j.Scheduling.Sites {
		check(fmt.Sprintf("scheduling.sites[%d]", k), s)
	}
	for k, s := range j.Scheduling.Prefer {
		check(fmt.Sprintf("scheduling.prefer[%d]", k), s)
	}
	for _, st := range j.Steps {
		if err := st.CheckSites(known); err != nil {
			var el ErrorList
			if errors.As(err, &el) {
				errs = append(errs, el...)
			}
		}
	}
	for _, s := range slices.Sorted(maps.Keys(j.SiteOptions)) {
		check("site_options."+s, s)
	}
	return errs.asError()
}

// errAt builds a FieldError at the recorded position of field.
func (j *Job) errAt(field string, sentinel error, msg string) *FieldError {
	return &FieldError{File: j.file, Pos: j.pos[field], Field: field, Msg: msg, Err: sentinel}
}
