package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// FieldError is one problem of a request: the field as the API's JSON
// names it ("Env[\"SLURM_X\"]", "Inputs[0].Local", "OutputDir") and what is
// wrong with it. Err is jobrules.ErrValue, jobrules.ErrPath or
// jobrules.ErrOutsideRoot (ErrOutsideRoot in this package).
type FieldError struct {
	Field string
	Msg   string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap returns the kind of problem.
func (e *FieldError) Unwrap() error { return e.Err }

// RequestError is every problem Submit found in a request, one per bad
// field, in the order Submit checks them.
// It wraps ErrBadRequest and each *FieldError, so errors.Is(err,
// ErrBadRequest) holds and errors.As finds the first FieldError.
type RequestError []*FieldError

func (e RequestError) Error() string {
	msgs := make([]string, len(e))
	for i, f := range e {
		msgs[i] = f.Error()
	}
	return ErrBadRequest.Error() + ": " + strings.Join(msgs, "; ")
}

// Unwrap exposes ErrBadRequest and the field errors.
func (e RequestError) Unwrap() []error {
	out := make([]error, 0, len(e)+1)
	out = append(out, ErrBadRequest)
	for _, f := range e {
		out = append(out, f)
	}
	return out
}

// problems collects a request's FieldErrors.
type problems RequestError

func (p *problems) add(field string, err error) {
	if err == nil {
		return
	}
	fe := &FieldError{Field: field, Msg: err.Error(), Err: jobrules.ErrValue}
	var re *jobrules.Error
	if errors.As(err, &re) {
		fe.Err = re.Err
	}
	*p = append(*p, fe)
}

func (p *problems) addf(field, format string, args ...any) {
	p.add(field, &jobrules.Error{Msg: fmt.Sprintf(format, args...), Err: jobrules.ErrValue})
}

// intake is what Submit checks before a job is stored: the request's
// fields, its files inside the allowed roots, its tier, its feasibility.
type intake struct {
	part
	limitMu sync.Mutex // serialises submissions while a user limit is counted (userlimits.go)
	outRoot []string   // Options.OutputRoot resolved (none or one)
	inRoots []string   // Options.InputRoots resolved
	offLim  []string   // Options.OffLimits resolved
}

// validate checks a request at submission time now against the rules every
// job obeys (bridge/jobrules, the same the job file parser applies) and
// the broker's roots, and normalises its local paths: each input's Local
// and the OutputDir become absolute, with their symbolic links resolved
// (a relative OutputDir is taken below the output root). It checks
// everything but site names (checkSites) and the reservation window's
// fit (checkWindow). On failure the error is a RequestError.
func (ik *intake) validate(req *Request, now time.Time) error {
	var p problems
	p.add("Name", jobrules.Name(req.Name))
	if k := req.IdempotencyKey; len(k) > MaxIdempotencyKey || strings.IndexFunc(k, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		p.addf("IdempotencyKey", "an idempotency key is 1 to %d printable ASCII characters without spaces (a UUID, or `openssl rand -hex 16`)", MaxIdempotencyKey)
	}
	switch {
	case len(req.Command) == 0 && req.Script == "":
		p.addf("Command", "a job needs a command (an argv list) or a script")
	case len(req.Command) > 0 && req.Script != "":
		p.addf("Script", "give a command or a script, not both")
	case len(req.Command) > jobrules.MaxArgs:
		p.addf("Command", "has %d words; at most %d", len(req.Command), jobrules.MaxArgs)
	case len(req.Command) > 0:
		if req.Command[0] == "" {
			p.addf("Command[0]", "must name a program to run")
		}
		for i, w := range req.Command {
			p.add("Command["+strconv.Itoa(i)+"]", jobrules.Word(w))
		}
	default:
		p.add("Script", jobrules.Script(req.Script))
	}
	if len(req.Env) > jobrules.MaxEnvVars {
		p.addf("Env", "has %d variables; at most %d", len(req.Env), jobrules.MaxEnvVars)
	} else {
		for _, k := range sortedKeys(req.Env) {
			f := "Env[" + strconv.Quote(k) + "]"
			if err := jobrules.EnvName(k); err != nil {
				p.add(f, err)
				continue
			}
			p.add(f, jobrules.EnvValue(req.Env[k]))
		}
	}
	if req.WorkDir != "" {
		if c, err := jobrules.RelPath(req.WorkDir, true); err != nil {
			p.add("WorkDir", err)
		} else {
			req.WorkDir = strings.TrimSuffix(c, "/")
		}
	}
	p.add("Nodes", jobrules.Count(int64(req.Nodes), 1, jobrules.MaxNodes, fmt.Sprintf("a whole number from 1 to %d", jobrules.MaxNodes)))
	p.add("CoresPerNode", jobrules.Count(int64(req.CoresPerNode), 0, jobrules.MaxCoresPerNode, fmt.Sprintf("0 (the site's default) or a whole number up to %d", jobrules.MaxCoresPerNode)))
	p.add("MemPerNode", jobrules.Count(req.MemPerNode, 0, jobrules.MaxMemPerNode, fmt.Sprintf("0 (the site's default) or bytes up to %d", int64(jobrules.MaxMemPerNode))))
	p.add("GPUsPerNode", jobrules.Count(int64(req.GPUsPerNode), 0, jobrules.MaxGPUsPerNode, fmt.Sprintf("a whole number 0..%d", jobrules.MaxGPUsPerNode)))
	p.add("Setup", jobrules.Setup(req.Setup))
	if len(req.SiteOptions) > jobrules.MaxSiteOptions {
		p.addf("SiteOptions", "has %d sites; at most %d", len(req.SiteOptions), jobrules.MaxSiteOptions)
	} else {
		for _, site := range slices.Sorted(maps.Keys(req.SiteOptions)) {
			o := req.SiteOptions[site]
			f := "SiteOptions[" + strconv.Quote(site) + "]"
			if o.Partition != "" {
				p.add(f+".Partition", jobrules.BatchName(o.Partition))
			}
			if o.Account != "" {
				p.add(f+".Account", jobrules.BatchName(o.Account))
			}
		}
	}
	p.add("Estimate", jobrules.Walltime(req.Estimate))
	if req.Sim.Runtime != 0 {
		p.add("Sim.Runtime", jobrules.Walltime(req.Sim.Runtime))
	}
	p.add("Sim.ExitCode", jobrules.Count(int64(req.Sim.ExitCode), 0, jobrules.MaxExitCode, "a whole number 0..255"))
	p.add("DataSize", jobrules.DataSize(req.DataSize))
	p.add("QoS", jobrules.QoS(req.QoS))
	ik.checkTier(&p, req)
	if !req.Deadline.IsZero() {
		p.add("Deadline", jobrules.Time(req.Deadline, now))
	}
	if w := req.Window; w != nil {
		for _, x := range []struct {
			field string
			t     time.Time
		}{{"Window.Earliest", w.Earliest}, {"Window.Latest", w.Latest}} {
			if x.t.IsZero() {
				p.addf(x.field, "missing; a reservation window needs its earliest start and its latest end")
			} else {
				p.add(x.field, jobrules.Time(x.t, now))
			}
		}
	}
	ik.validateFiles(req, &p)
	if len(p) > 0 {
		return RequestError(p)
	}
	return nil
}

// validateFiles checks the inputs, outputs and output directory.
func (ik *intake) validateFiles(req *Request, p *problems) {
	if len(req.Outputs) > jobrules.MaxFiles {
		p.addf("Outputs", "has %d paths; at most %d", len(req.Outputs), jobrules.MaxFiles)
	} else {
		seen := map[string]bool{}
		for i, o := range req.Outputs {
			f := "Outputs[" + strconv.Itoa(i) + "]"
			c, err := jobrules.RelPath(o, false)
			switch {
			case err != nil:
				p.add(f, err)
			case seen[c]:
				p.addf(f, "%q is already listed", o)
			default:
				seen[c] = true
				req.Outputs[i] = c
			}
		}
	}
	if len(req.Inputs) > jobrules.MaxFiles {
		p.addf("Inputs", "has %d files; at most %d", len(req.Inputs), jobrules.MaxFiles)
	} else {
		seen := map[string]bool{}
		var who *inputReader
		if len(req.Inputs) > 0 {
			who = ik.inputReader(req.Owner)
		}
		for i := range req.Inputs {
			in := &req.Inputs[i]
			f := "Inputs[" + strconv.Itoa(i) + "]"
			if local, err := ik.inputFile(who, in.Local); err != nil {
				p.add(f+".Local", err)
			} else {
				in.Local = local
			}
			remote := in.Remote
			if strings.HasSuffix(remote, "/") {
				remote += path.Base(filepath.ToSlash(in.Local))
			}
			c, err := jobrules.RelPath(remote, false)
			switch {
			case err != nil:
				p.add(f+".Remote", err)
			case seen[c]:
				p.addf(f+".Remote", "%q is already the remote name of another input", c)
			default:
				seen[c] = true
				in.Remote = c
			}
			if in.Mode&^fs.ModePerm != 0 {
				p.addf(f+".Mode", "must be a file mode 0..0777, got %#o", uint32(in.Mode))
			}
		}
	}
	ik.validateSiteInputs(req, p)
	if req.OutputDir != "" {
		if dir, err := ik.outputDir(req.Owner, req.OutputDir); err != nil {
			p.add("OutputDir", err)
		} else {
			req.OutputDir = dir
		}
	}
}

// inputFile confines an input's local path to the input roots (and to
// what who may read) and checks that it is a regular file; it returns the
// path with its links resolved.
func (ik *intake) inputFile(who *inputReader, local string) (string, error) {
	if local == "" {
		return "", &jobrules.Error{Msg: "must be the absolute path of a file on the broker's machine, got an empty string", Err: jobrules.ErrValue}
	}
	if !filepath.IsAbs(local) {
		return "", &jobrules.Error{Msg: fmt.Sprintf("must be an absolute path, got %q", local), Err: jobrules.ErrValue}
	}
	r, err := jobrules.Confine(local, ik.inRoots, "the allowed input roots")
	if err != nil {
		return "", err
	}
	if err := ik.offLimits(local, r, false); err != nil {
		return "", err
	}
	if err := who.check(local, r); err != nil {
		return "", err
	}
	st, err := os.Stat(r)
	switch {
	case err != nil:
		return "", &jobrules.Error{Msg: fmt.Sprintf("cannot read %s: %v", local, errors.Unwrap(err)), Err: jobrules.ErrValue}
	case !st.Mode().IsRegular():
		return "", &jobrules.Error{Msg: fmt.Sprintf("%s is not a regular file", local), Err: jobrules.ErrValue}
	}
	return r, nil
}

// outputDir resolves owner's requested output directory: relative ones
// below the owner's output root (userOutputRoot); every one confined to it.
func (ik *intake) outputDir(owner, dir string) (string, error) {
	if len(ik.outRoot) == 0 {
		return "", &jobrules.Error{Msg: fmt.Sprintf("%s is not allowed: this broker has no output root, it fetches no outputs", dir), Err: jobrules.ErrOutsideRoot}
	}
	roots, err := ik.userOutputRoot(owner)
	if err != nil {
		return "", err
	}
	what := "the output root"
	if ik.otherUser(owner) {
		what = "user " + owner + "'s directory of the output root"
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(roots[0], dir)
	}
	r, err := jobrules.Confine(dir, roots, what)
	if err != nil {
		return "", err
	}
	return r, ik.offLimits(dir, r, true)
}

// offLimits refuses a resolved path r (asked as p) inside one of the
// Options.OffLimits directories — or, for an output directory (holds),
// one that holds such a directory, where an output's relative name could
// reach it.
func (ik *intake) offLimits(p, r string, holds bool) error {
	for _, o := range ik.offLim {
		_, in := jobrules.Within(o, r)
		_, over := jobrules.Within(r, o)
		if in || (holds && over) {
			return &jobrules.Error{Msg: fmt.Sprintf("%s reaches %s, the daemon's own state (its job store, tokens and users' site keys), which no job may read or write", p, o),
				Err: jobrules.ErrOutsideRoot}
		}
	}
	return nil
}

// fetchAllowed checks again, when a job's outputs are about to be fetched,
// that its output directory is inside the output root (a symbolic link may
// have appeared since it was submitted, or the job was stored by an older
// broker). When it is not, the refusal is recorded and nothing is fetched.
// The ledger's lock held.
func (ik *intake) fetchAllowed(j *Job, now time.Time) bool {
	if _, err := ik.outputDir(j.Req.Owner, j.Req.OutputDir); err != nil {
		msg := fmt.Sprintf("outputs not fetched: OutputDir: %v", err)
		j.FetchErrors = append(j.FetchErrors, msg)
		ik.note(j, now, "fetch-failed", "", msg)
		return false
	}
	return true
}

// setRoots resolves Options.OutputRoot and Options.InputRoots.
func (ik *intake) setRoots(o Options) error {
	if o.OutputRoot != "" {
		r, err := jobrules.ResolveRoots([]string{o.OutputRoot})
		if err != nil {
			return fmt.Errorf("%w: output %w", ErrBadRequest, err)
		}
		ik.outRoot = r
	}
	r, err := jobrules.ResolveRoots(o.InputRoots)
	if err != nil {
		return fmt.Errorf("%w: input %w", ErrBadRequest, err)
	}
	ik.inRoots = r
	for _, o := range o.OffLimits {
		if r, err := jobrules.Resolve(o); err == nil {
			ik.offLim = append(ik.offLim, r)
		} else {
			ik.offLim = append(ik.offLim, filepath.Clean(o))
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
