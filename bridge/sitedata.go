package bridge

// Inputs that lie at a site (Request.SiteInputs, a job file's inputs with
// site: and path:).
//
// Validation (validateSiteInputs): every one names a configured site, a
// path relative to that site's remote_dir (jobrules.SiteFilePath: no
// absolute path, no "..", nothing hidden), a size in 1 B .. 64 TiB, and a
// remote name in the job directory that no other input uses; all lie at
// the same site (paper 003's model: one repository per task). They set the
// request's Origin and DataSize, which is what every planner reads: the
// completion of a placement on site s is max(start, now) + transfer(origin
// → s) + run time, with transfer zero at the origin itself.
//
// Staging (stageData), per component, just before its submission:
//   - at the site the data lies at: no copy, the file is linked into the
//     job directory under its remote name (DataHolder.LinkData: a relative
//     symbolic link made with SFTP, confined like every staged file), so
//     the job reads the same name wherever it runs;
//   - at any other real site: relayed through the broker. The file is read
//     from its site over SFTP (DataHolder.ReadData: confined, symbolic
//     links refused, at most the declared size, SHA-256 taken) into a spool
//     file in a private temporary directory, then staged to the executing
//     site as an ordinary input (Stager.Put: a temporary name renamed into
//     place, size verified). A remote-to-remote copy is not used: it needs
//     the executing site's login node to reach the other site with
//     credentials, which HPC sites do not give batch nodes or login nodes;
//     the broker already holds both connections. The spool (rather than a
//     pipe) is because staging reads its inputs from local files of known
//     size (the transfer deadline and the atomic Put are sized from it),
//     and lets the copies of a replicated job share one read.
//   - at a simulated site: nothing moves (simulated sites hold no files);
//     the predicted transfer is already in the simulated run (spec).
//
// A failure names the site and path. One that waiting cannot cure (the
// file is missing, larger than declared, a link or special file, the site
// cannot hand out files) fails the job; a dropped link or a timeout
// (backends.Retryable) leaves it queued for the next cycle, up to
// MaxAttempts. Nothing half-written is used: the spool file is complete or
// the job is not submitted, and the executing site sees the file under its
// name only once the Put's rename is done.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/jobrules"
	"github.com/gridsub/gridsub/policy"
)

// validateSiteInputs checks req.SiteInputs and sets Origin and DataSize
// from them (see the file comment).
func (ik *intake) validateSiteInputs(req *Request, p *problems) {
	if len(req.SiteInputs) == 0 {
		return
	}
	if len(req.SiteInputs) > jobrules.MaxFiles {
		p.addf("SiteInputs", "has %d files; at most %d", len(req.SiteInputs), jobrules.MaxFiles)
		return
	}
	seen := map[string]bool{}
	for _, in := range req.Inputs {
		seen[in.Remote] = true
	}
	var total int64
	bad := len(*p)
	site := req.SiteInputs[0].Site
	for i := range req.SiteInputs {
		in := &req.SiteInputs[i]
		f := "SiteInputs[" + strconv.Itoa(i) + "]"
		if _, ok := ik.siteIdx[in.Site]; !ok {
			p.addf(f+".Site", "unknown site %q (known sites: %s)", in.Site, strings.Join(ik.names, ", "))
		} else if in.Site != site {
			p.addf(f+".Site", "all inputs that lie at a site must lie at the same one (the planner models one data origin per job): %s, not %s", site, in.Site)
		}
		if c, err := jobrules.SiteFilePath(in.Path); err != nil {
			p.add(f+".Path", err)
		} else {
			in.Path = c
		}
		if err := jobrules.SiteFileSize(in.Size); err != nil {
			p.add(f+".Size", err)
		} else {
			total += in.Size
		}
		remote := in.Remote
		if remote == "" {
			remote = path.Base(in.Path)
		}
		c, err := jobrules.RelPath(remote, false)
		switch {
		case err != nil:
			p.add(f+".Remote", err)
		case strings.HasSuffix(c, "/"):
			p.addf(f+".Remote", "must name a file in the job directory, got the directory %q", remote)
		case seen[c]:
			p.addf(f+".Remote", "%q is already the remote name of another input", c)
		default:
			seen[c] = true
			in.Remote = c
		}
	}
	if len(*p) > bad {
		return
	}
	if total > jobrules.MaxDataSize {
		p.addf("SiteInputs", "total %d bytes; at most %d (64 TiB)", total, int64(jobrules.MaxDataSize))
		return
	}
	switch {
	case req.Origin != "" && req.Origin != site:
		p.addf("Origin", "is %s, but the inputs lie at %s: the data's origin is where its inputs lie (leave Origin empty)", req.Origin, site)
	case req.DataSize != 0 && req.DataSize != total:
		p.addf("DataSize", "is %d bytes, but the inputs that lie at %s declare %d (leave DataSize 0)", req.DataSize, site, total)
	default:
		req.Origin, req.DataSize = site, total
	}
}

// relays holds the spool files of one round of submissions: a file read
// once from its site serves every component that needs it.
type relays struct {
	dir   string
	files map[string]string // site + "\x00" + path -> spool file
}

// close removes the spool files.
func (r *relays) close() {
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// stageData makes the inputs that lie at a site available to sp, the spec
// of a component to be submitted at site s: linked there in place, or
// relayed (a spool file added to sp.Inputs). Both go through owner's
// identity at the site that holds the file (siteTable.backendFor): a user
// reads at a site only what their own login may read there. Outside the
// ledger's lock.
func (sm *submitter) stageData(ctx context.Context, r *relays, s int, owner string, sp *backends.JobSpec, ins []backends.SiteFile) ([]string, error) {
	if len(ins) == 0 || sm.sites[s].Simulated {
		return nil, nil
	}
	var notes []string
	dst := sm.names[s]
	for _, in := range ins {
		if in.Site == dst {
			be, err := sm.backendFor(ctx, s, owner)
			if err != nil {
				return notes, fmt.Errorf("input %s:%s: %w", in.Site, in.Path, err)
			}
			dh, ok := backends.AsDataHolder(be)
			if !ok {
				return notes, fmt.Errorf("%w: input %s:%s: site %s cannot show a job the files that lie there (no DataHolder capability)", backends.ErrUnsupported, in.Site, in.Path, dst)
			}
			n, err := dh.LinkData(ctx, sp, in.Path, in.Remote)
			if err != nil {
				return notes, fmt.Errorf("input %s:%s: %w", in.Site, in.Path, err)
			}
			if n > in.Size {
				return notes, fmt.Errorf("%w: input %s:%s is %d bytes, more than its declared size %d", backends.ErrInvalidSpec, in.Site, in.Path, n, in.Size)
			}
			notes = append(notes, fmt.Sprintf("%s:%s used in place as %s (%s, no copy)", in.Site, in.Path, in.Remote, sizeText(n)))
			continue
		}
		local, note, err := sm.relay(ctx, r, owner, in)
		if err != nil {
			return notes, err
		}
		if note != "" {
			notes = append(notes, note+" to "+dst)
		}
		sp.Inputs = append(slices.Clip(sp.Inputs), backends.StageFile{Local: local, Remote: in.Remote, Mode: 0o644})
	}
	return notes, nil
}

// relay reads in from its site, through owner's identity there, into a
// spool file (once per round and owner) and returns its local path and
// what happened ("" when it was read already).
func (sm *submitter) relay(ctx context.Context, r *relays, owner string, in backends.SiteFile) (string, string, error) {
	key := owner + "\x00" + in.Site + "\x00" + in.Path
	if f, ok := r.files[key]; ok {
		return f, "", nil
	}
	src, ok := sm.siteIdx[in.Site]
	if !ok {
		return "", "", fmt.Errorf("%w: input %s:%s: unknown site %s", backends.ErrInvalidSpec, in.Site, in.Path, in.Site)
	}
	be, err := sm.backendFor(ctx, src, owner)
	if err != nil {
		return "", "", fmt.Errorf("input %s:%s: %w", in.Site, in.Path, err)
	}
	dh, ok := backends.AsDataHolder(be)
	if !ok {
		why := "it cannot hand out the files that lie there (no DataHolder capability)"
		if sm.sites[src].Simulated {
			why = "it is a simulated site, which holds no files"
		}
		return "", "", fmt.Errorf("%w: input %s:%s cannot be copied from %s: %s", backends.ErrUnsupported, in.Site, in.Path, in.Site, why)
	}
	if r.dir == "" {
		d, err := os.MkdirTemp("", "gridsub-relay-") // mode 0700
		if err != nil {
			return "", "", fmt.Errorf("input %s:%s: making a spool directory: %w", in.Site, in.Path, err)
		}
		r.dir, r.files = d, map[string]string{}
	}
	f, err := os.CreateTemp(r.dir, "in-*")
	if err != nil {
		return "", "", fmt.Errorf("input %s:%s: spool file: %w", in.Site, in.Path, err)
	}
	sm.log.Info("relaying a site input through the broker", "site", in.Site, "path", in.Path, "declared_bytes", in.Size)
	tr, err := dh.ReadData(ctx, in.Path, f, in.Size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if fi, serr := os.Stat(f.Name()); serr != nil || fi.Size() != tr.Bytes {
			err = fmt.Errorf("%w: spool file holds %d bytes of %d read", backends.ErrUnavailable, fi.Size(), tr.Bytes)
		}
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", "", fmt.Errorf("input %s:%s: %w", in.Site, in.Path, err)
	}
	r.files[key] = f.Name()
	sm.log.Info("site input read", "site", in.Site, "path", in.Path, "bytes", tr.Bytes, "took", tr.Duration.Round(time.Millisecond), "sha256", tr.SHA256)
	rate := ""
	if s := tr.Duration.Seconds(); s > 0 {
		rate = " at " + rateText(float64(tr.Bytes)/s)
	}
	sum := tr.SHA256
	if len(sum) > 12 {
		sum = sum[:12]
	}
	return f.Name(), fmt.Sprintf("%s:%s relayed through the broker as %s (%s read in %s%s, sha256 %s)",
		in.Site, in.Path, in.Remote, sizeText(tr.Bytes), tr.Duration.Round(time.Millisecond), rate, sum), nil
}

// stagePending stages the site inputs of every pending submission; a job
// whose data cannot be staged is settled here (failed, or queued again
// when waiting may cure it) and left out of what is returned.
func (sm *submitter) stagePending(ctx context.Context, now time.Time, r *relays, pend []pendingSubmit, rep *CycleReport) []pendingSubmit {
	out := pend[:0:0]
	for _, ps := range pend {
		sm.mu.Lock()
		j := sm.jobs[ps.id]
		var ins []backends.SiteFile
		if j != nil {
			ins = j.Req.SiteInputs
		}
		sm.mu.Unlock()
		if len(ins) == 0 {
			out = append(out, ps)
			continue
		}
		var notes []string
		var err error
		for k, part := range ps.d.Chosen.Parts {
			var n []string
			n, err = sm.stageData(ctx, r, part.Site, ps.owner, ps.specs[k], ins)
			notes = append(notes, n...)
			if err != nil {
				break
			}
		}
		sm.mu.Lock()
		for _, n := range notes {
			sm.note(j, now, "data", "", n)
		}
		if err == nil {
			sm.mu.Unlock()
			out = append(out, ps)
			continue
		}
		sm.dataFailed(ctx, now, j, err, rep)
		sm.mu.Unlock()
	}
	return out
}

// dataFailed settles a job whose data could not be staged before any site
// heard of it. The ledger's lock held.
func (sm *submitter) dataFailed(ctx context.Context, now time.Time, j *Job, err error, rep *CycleReport) {
	j.Comps = nil
	if backends.Retryable(err) && j.Attempts < sm.opts.MaxAttempts {
		sm.transition(j, Queued, now, "retry-later", "", fmt.Sprintf("staging its data failed (%v); stays queued", err))
	} else {
		why := fmt.Sprintf("staging its data failed: %v", err)
		if !backends.Retryable(err) && !errors.Is(err, context.Canceled) {
			why += " (not retryable)"
		}
		sm.endAs(j, now, Failed, "failed", "", why)
		sm.dequeue(j.ID)
	}
	_ = sm.save(ctx, j)
	rep.Errors = append(rep.Errors, fmt.Errorf("job %s: %w", j.ID, err))
}

// dataNote says, for an explanation, where a job's data lies and what
// moving it to each placement's sites costs ("data at Harbin: 2.0 GiB,
// 3m12s to Beijing at 11 MB/s; in place at Harbin"). "" without data.
func dataNote(s *policy.Snapshot, names []string, pj *policy.Job, opts []policy.Option) string {
	if pj.Origin < 0 || pj.DataSize <= 0 {
		return ""
	}
	var parts []string
	done := map[int]bool{}
	for _, o := range opts {
		for _, p := range o.Parts {
			if done[p.Site] {
				continue
			}
			done[p.Site] = true
			if p.Site == pj.Origin {
				parts = append(parts, "in place at "+names[p.Site])
				continue
			}
			t := s.TransferTime(pj.Origin, p.Site, pj.DataSize)
			rate := "free (no link measured or configured)"
			if t > 0 {
				rate = "at " + rateText(float64(pj.DataSize)/t.Seconds())
			}
			parts = append(parts, fmt.Sprintf("%s to %s %s", t.Round(time.Second), names[p.Site], rate))
		}
	}
	return fmt.Sprintf("data at %s: %s; %s", names[pj.Origin], sizeText(pj.DataSize), strings.Join(parts, "; "))
}

// sizeText writes a byte count in binary units with up to one decimal
// ("2 GiB", "1.5 MiB", "800 B").
func sizeText(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(n), 0
	for u < len(units)-1 && v >= 1024 {
		v /= 1024
		u++
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + " " + units[u]
}

// rateText writes bytes per second in decimal units, as links are quoted
// ("11 MB/s").
func rateText(bps float64) string {
	units := []string{"B/s", "kB/s", "MB/s", "GB/s", "TB/s"}
	u := 0
	for u < len(units)-1 && bps >= 1000 {
		bps /= 1000
		u++
	}
	return strings.TrimSuffix(strconv.FormatFloat(bps, 'f', 1, 64), ".0") + " " + units[u]
}
