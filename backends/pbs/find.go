package pbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// idFilesScript prints "<dir>:<id>" for each of a grid job's directories
// holding an id file: `bash -c idFilesScript gridsub-ids <remote dir> <grid id>`.
// The grid id is checked by sshbatch.ValidGridID before, and is quoted here.
const idFilesScript = `cd -- "$1" 2>/dev/null || exit 0; for f in gridsub/"$2"/` + IDFile + ` gridsub/"$2"-*/` + IDFile +
	`; do [ -f "$f" ] && [ ! -L "$f" ] && printf '%s:%s\n' "${f%/*}" "$(head -c 256 -- "$f")"; done; exit 0`

// FindByGridID lists every job tagged with gridID: the login user's jobs
// PBS still knows, finished ones included (one id-less qstat -x filtered
// at the site by owner and tag: bounded at any history length; the tag is
// in Variable_List), plus jobs whose id PBS no longer
// has but whose job directory recorded it, with the state of their
// exit-code file.
func (b *Backend) FindByGridID(ctx context.Context, gridID string) ([]backends.JobStatus, error) {
	if !sshbatch.ValidGridID(gridID) {
		return nil, fmt.Errorf("%w: grid id %q", backends.ErrInvalidSpec, gridID)
	}
	if b.cfg.User == "" {
		return nil, fmt.Errorf("%w: %s: FindByGridID needs the login user (Config.User)", backends.ErrInvalidSpec, b.cfg.Name)
	}
	argv := b.cmds.FindArgv(b.cfg.User, GridTag(gridID))
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 && !(r.ExitCode == 153 && len(UnknownJobIDs(r.Stderr)) > 0) {
		return nil, b.commandErr(argv, r)
	}
	recs, err := ParseDSV(r.Stdout)
	if err != nil {
		return nil, err
	}
	var out []backends.JobStatus
	seen := map[backends.JobID]bool{}
	for _, rec := range recs {
		if rec.Vars[TagVar] != GridTag(gridID) || !strings.HasPrefix(rec.Attrs["Job_Owner"], b.cfg.User+"@") {
			continue
		}
		st, err := rec.Status(b.cfg.Location)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
		seen[rec.ID] = true
		if wd := rec.Vars["PBS_O_WORKDIR"]; wd != "" {
			b.mu.Lock()
			b.dirs[rec.ID] = wd
			b.mu.Unlock()
		}
	}
	// Jobs PBS has forgotten: their directories still name them.
	r, err = b.exec(ctx, []string{"bash", "-c", idFilesScript, "gridsub-ids", b.remoteDir(), gridID}, nil)
	if err != nil {
		return nil, err
	}
	var gone []backends.JobID
	for dir, id := range ParseIDFiles(r.Stdout) {
		if !dirBelongs(dir, gridID) || seen[id] {
			continue
		}
		b.mu.Lock()
		b.dirs[id] = path.Join(b.remoteDir(), dir)
		b.mu.Unlock()
		gone = append(gone, id)
	}
	sort.Slice(gone, func(i, k int) bool { return lessID(string(gone[i]), string(gone[k])) })
	if len(gone) > 0 {
		found := map[backends.JobID]backends.JobStatus{}
		if err := b.fromExitFiles(ctx, gone, found); err != nil {
			return nil, err
		}
		for _, id := range gone {
			st, ok := found[id]
			if !ok {
				st = backends.JobStatus{ID: id, State: backends.StateLost, ExitCode: -1,
					Reason: "PBS has no record and the job left no exit-code file"}
			}
			st.GridID = gridID
			out = append(out, st)
		}
	}
	return out, nil
}

// ParseIDFiles reads idFilesScript's "<dir>:<id>" lines; lines whose id is
// not a PBS job id are skipped.
func ParseIDFiles(out []byte) map[string]backends.JobID {
	m := map[string]backends.JobID{}
	for _, l := range lines(out) {
		i := strings.LastIndexByte(l, ':')
		if i < 0 {
			continue
		}
		if id := strings.TrimSpace(l[i+1:]); validJobID(id) {
			m[l[:i]] = backends.JobID(id)
		}
	}
	return m
}

// dirBelongs reports whether a relative job directory is one of gridID's:
// gridsub/<gridID> or gridsub/<gridID>-<k>.
func dirBelongs(dir, gridID string) bool {
	base, ok := strings.CutPrefix(dir, "gridsub/")
	if !ok {
		return false
	}
	if base == gridID {
		return true
	}
	k, ok := strings.CutPrefix(base, gridID+"-")
	return ok && k != "" && strings.Trim(k, "0123456789") == ""
}

// FetchOutputs copies the job's stdout and stderr (gridsub.out,
// gridsub.err) and spec.Outputs from its job directory into localDir, and
// returns the local paths. A missing stdout/stderr is skipped; a missing
// declared output is an error. Every remote path goes through the
// confined Stager; a trailing "/" fetches a directory's regular files.
func (b *Backend) FetchOutputs(ctx context.Context, id backends.JobID, spec *backends.JobSpec, localDir string) ([]string, error) {
	if b.stage == nil {
		return nil, fmt.Errorf("%w: %s has no stager", backends.ErrUnsupported, b.cfg.Name)
	}
	dir := JobDir(spec)
	var got []string
	fetch := func(rel string, optional bool) error {
		local := filepath.Join(localDir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return err
		}
		tmp := local + ".gridsub-part"
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		_, gerr := b.stage.Get(ctx, path.Join(dir, rel), f)
		cerr := f.Close()
		if gerr != nil {
			os.Remove(tmp)
			if optional && errors.Is(gerr, os.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("%s: fetching %s of job %s: %w", b.cfg.Name, rel, id, gerr)
		}
		if cerr != nil {
			os.Remove(tmp)
			return cerr
		}
		if err := os.Rename(tmp, local); err != nil {
			return err
		}
		got = append(got, local)
		return nil
	}
	for _, f := range []string{StdoutFile, StderrFile} {
		if err := fetch(f, true); err != nil {
			return got, err
		}
	}
	for _, o := range spec.Outputs {
		rel, err := relPath("output", o)
		if err != nil {
			return got, err
		}
		if !strings.HasSuffix(o, "/") {
			if err := fetch(rel, false); err != nil {
				return got, err
			}
			continue
		}
		files, err := b.listFiles(ctx, path.Join(dir, rel))
		if err != nil {
			return got, fmt.Errorf("%s: listing %s of job %s: %w", b.cfg.Name, o, id, err)
		}
		for _, f := range files {
			if err := fetch(path.Join(rel, f), false); err != nil {
				return got, err
			}
		}
	}
	return got, nil
}

func (b *Backend) listFiles(ctx context.Context, dir string) ([]string, error) {
	argv := ListFilesArgv(path.Join(b.remoteDir(), dir))
	r, err := b.exec(ctx, argv, nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return nil, b.commandErr(argv, r)
	}
	return ParseFileList(r.Stdout)
}

// ParseFileList reads find -printf '%P\0': relative paths, each checked to
// stay inside the listed directory.
func ParseFileList(out []byte) ([]string, error) {
	var fs []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p == "" {
			continue
		}
		c, err := relPath("listed file", p)
		if err != nil {
			return nil, fmt.Errorf("%w: find listed %q", backends.ErrBadOutput, p)
		}
		fs = append(fs, c)
	}
	sort.Strings(fs)
	return fs, nil
}
