package pbs

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// idFilesScript prints "<dir>:<id>" for each of a grid job's directories
// holding an id file: `bash -c idFilesScript gridsub-ids <remote dir> <grid id>`.
// The grid id is checked by sshbatch.ValidGridID before, and is quoted here.
const idFilesScript = `cd -- "$1" 2>/dev/null || exit 0; for f in gridsub/"$2"/` + IDFile + ` gridsub/"$2"-*/` + IDFile +
	`; do [ -f "$f" ] && [ ! -L "$f" ] && printf '%s:%s\n' "${f%/*}" "$(head -c 256 -- "$f")"; done; exit 0`

// Find lists every job tagged with gridID: the login user's jobs PBS
// still knows, finished ones included (one id-less qstat -x filtered at
// the site by owner and tag: bounded at any history length; the tag is in
// Variable_List), plus jobs whose id PBS no longer has but whose job
// directory recorded it (Found.Gone, in the order of their ids).
func (d *dialect) Find(ctx context.Context, x *sshbatch.Exec, gridID string) ([]sshbatch.Found, error) {
	if x.User == "" {
		return nil, fmt.Errorf("%w: %s: FindByGridID needs the login user (Config.User)", backends.ErrInvalidSpec, x.Site)
	}
	// An array element may be a subjob of a native array tagged with its
	// parent and attempt (sshbatch.ArrayTag; qsub -J): found there, it was
	// not also submitted alone (one attempt is submitted one way).
	if parent, _, attempt, ok := backends.ArrayElement(gridID); ok && d.cfg.NativeArrays {
		sub, err := d.arrayListing(ctx, x, sshbatch.ArrayTag(parent, attempt), gridID)
		if err != nil {
			return nil, err
		}
		for _, rec := range sub {
			if rec.GridID() == gridID && rec.Owner(x.User) {
				st, err := rec.Status(d.cfg.Location)
				if err != nil {
					return nil, err
				}
				dir := rec.Vars["PBS_O_WORKDIR"]
				if dir != "" {
					dir = path.Join(dir, gridID) // a subjob runs in its own directory below the array's
				}
				return []sshbatch.Found{{Status: st, Dir: dir}}, nil
			}
		}
	}
	recs, err := d.dsv(ctx, x, d.cmds.FindArgv(x.User, GridTag(gridID)))
	if err != nil {
		return nil, err
	}
	var out []sshbatch.Found
	seen := map[backends.JobID]bool{}
	for _, rec := range recs {
		if rec.GridID() != gridID || !rec.Owner(x.User) || seen[rec.ID] {
			continue
		}
		st, err := rec.Status(d.cfg.Location)
		if err != nil {
			return nil, err
		}
		out = append(out, sshbatch.Found{Status: st, Dir: rec.Vars["PBS_O_WORKDIR"]})
		seen[rec.ID] = true
	}
	// Jobs PBS has forgotten: their directories still name them.
	remote := d.cfg.RemoteDir
	if remote == "" {
		remote = "."
	}
	r, err := x.Run(ctx, []string{"bash", "-c", idFilesScript, "gridsub-ids", remote, gridID}, nil)
	if err != nil {
		return nil, err
	}
	var gone []sshbatch.Found
	for dir, id := range ParseIDFiles(r.Stdout) {
		if !strings.HasPrefix(dir, "gridsub/") || !sshbatch.DirBelongs(dir, gridID) || seen[id] {
			continue
		}
		gone = append(gone, sshbatch.Found{Status: backends.JobStatus{ID: id}, Dir: path.Join(remote, dir), Gone: true})
	}
	sort.Slice(gone, func(i, k int) bool { return lessID(string(gone[i].Status.ID), string(gone[k].Status.ID)) })
	return append(out, gone...), nil
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

// arrayListing lists the jobs tagged with a native array's tag (one find
// command). After a restart every element of an array is looked up in
// turn, so a listing that holds gridID is reused for arrayTTL; a listing
// without it is never trusted from before: it is asked again.
func (d *dialect) arrayListing(ctx context.Context, x *sshbatch.Exec, tag, gridID string) ([]JobRecord, error) {
	now := d.cfg.Now()
	d.mu.Lock()
	c, ok := d.arrays[tag]
	d.mu.Unlock()
	if ok && now.Sub(c.at) < arrayTTL && now.Sub(c.at) >= 0 {
		for _, rec := range c.recs {
			if rec.GridID() == gridID {
				return c.recs, nil
			}
		}
	}
	recs, err := d.dsv(ctx, x, d.cmds.FindArgv(x.User, tag))
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.arrays == nil || len(d.arrays) > 64 {
		d.arrays = map[string]arrayList{}
	}
	d.arrays[tag] = arrayList{at: now, recs: recs}
	d.mu.Unlock()
	return recs, nil
}

// arrayTTL is how long a native array's listing answers for the elements
// it holds (their states then are that old; the next poll refreshes them).
const arrayTTL = 30 * time.Second

// arrayList is one listing of a native array's jobs.
type arrayList struct {
	at   time.Time
	recs []JobRecord
}
