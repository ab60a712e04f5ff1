package slurm

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// IDFile is the file the driver of a native array's element writes into
// the element's job directory when it starts: the element's id
// (`<array>_<index>`). An element SLURM has forgotten (MinJobAge) on a
// site without accounting is found by it; its exit-code file then says how
// it ended.
const IDFile = sshbatch.ElementIDFile

// elementAfter is the driver's line, run in the element's directory, that
// records the element's id (IDFile).
const elementAfter = `printf '%s_%s\n' "$SLURM_ARRAY_JOB_ID" "$SLURM_ARRAY_TASK_ID" > ` + IDFile + "\n"

// sacctTaggedScript lists, at the site, the login user's jobs accounting
// knows since $1 whose comment ends with $2 (a native array's tag): `sh -c
// sacctTaggedScript gridsub-sacct <since> <tag> <sacct argv...>`. sacct's
// failure is its own (its words on stderr, its status); no match is no
// output. The filter runs at the site, so the answer is bounded by the
// array's size, not by the user's history.
const sacctTaggedScript = `s=$1; t=$2; shift 2; out=$("$@" -S "$s") || exit $?; printf '%s\n' "$out" | grep -F -e "|$t"; exit 0`

// SacctTaggedArgv asks accounting for the elements of the native array
// tagged tag (sshbatch.ArrayTag) that started since since: one line
// `JobID|State|ExitCode|Start|End|Comment` each (ParseSacctTagged). The
// comment is in accounting only where the site keeps it
// (AccountingStoreFlags=job_comment); elsewhere nothing matches and the
// element is found by its IDFile.
func SacctTaggedArgv(tag string, since time.Time) []string {
	return append([]string{"/bin/sh", "-c", sacctTaggedScript, "gridsub-sacct", since.UTC().Format("2006-01-02T15:04:05"), tag},
		quietEnv("sacct", "-X", "-n", "-P", "--format=JobID,State,ExitCode,Start,End,Comment")...)
}

// ParseSacctTagged reads SacctTaggedArgv's lines: the status of each
// element record (JobID `<array>_<index>`) whose comment is exactly a
// native array's tag, with its element's grid tag in GridID. Other lines
// (a pending array's `12_[0-9]`, another comment) are skipped.
func ParseSacctTagged(out []byte) ([]backends.JobStatus, error) {
	var sts []backends.JobStatus
	for _, l := range lines(out) {
		f := strings.SplitN(l, "|", 6)
		if len(f) != 6 {
			return nil, badOutput("sacct", out, fmt.Sprintf("line %q is not JobID|State|ExitCode|Start|End|Comment", l))
		}
		if !elementIDRe.MatchString(f[0]) {
			continue
		}
		tag := elementTag(f[0], f[5])
		if tag == "" {
			continue
		}
		st := MapState(f[1])
		if st == backends.StateUnknown {
			return nil, badOutput("sacct", out, fmt.Sprintf("unknown state %q", f[1]))
		}
		js := backends.JobStatus{ID: backends.JobID(f[0]), GridID: tag, State: st, ExitCode: -1,
			Reason: "from sacct (found by its tag)", Start: epoch(f[3]), End: epoch(f[4])}
		if c, s, ok := parseExit(f[2]); ok && st.Final() {
			js.ExitCode, js.Signal = c, s
		}
		sts = append(sts, js)
	}
	return sts, nil
}

// elementListing is one answer of SacctTaggedArgv for a native array.
type elementListing struct {
	at  time.Time
	sts []backends.JobStatus
}

// elementListingTTL is how long a native array's accounting listing
// answers for the elements it holds: after a restart every element is
// looked up in turn, and one sacct answers for all of them.
const elementListingTTL = 30 * time.Second

// findForgottenElement finds the element gridID (a backends.ElementTag)
// of a native array that squeue no longer lists: in accounting by its
// array's tag (the comment) where the site has accounting, else by the id
// its driver wrote into the element's directory (Found.Gone: the Backend
// reads its exit-code file). Nothing found: the element was never started
// (or never submitted).
func (d *dialect) findForgottenElement(ctx context.Context, x *sshbatch.Exec, gridID string) ([]sshbatch.Found, error) {
	parent, _, attempt, ok := backends.ArrayElement(gridID)
	if !ok {
		return nil, nil
	}
	remote := d.cfg.RemoteDir
	if remote == "" {
		remote = "."
	}
	dir := path.Join(remote, sshbatch.JobDir(&backends.JobSpec{GridID: gridID}))
	sts, err := d.elementsInAccounting(ctx, x, sshbatch.ArrayTag(parent, attempt), gridID)
	if err != nil {
		return nil, err
	}
	for _, st := range sts {
		if st.GridID == gridID {
			return []sshbatch.Found{{Status: st, Dir: dir}}, nil
		}
	}
	r, err := x.Plain(ctx, []string{"head", "-c", "64", "--", path.Join(dir, IDFile)}, nil)
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(string(r.Stdout))
	if r.ExitCode != 0 || !elementIDRe.MatchString(id) {
		return nil, nil // no id file: the element never started
	}
	return []sshbatch.Found{{Status: backends.JobStatus{ID: backends.JobID(id)}, Dir: dir, Gone: true}}, nil
}

// elementsInAccounting lists the elements of the native array tagged tag
// that accounting knows (nil where the site has none), reusing a listing
// that holds gridID for elementListingTTL.
func (d *dialect) elementsInAccounting(ctx context.Context, x *sshbatch.Exec, tag, gridID string) ([]backends.JobStatus, error) {
	now := d.cfg.Now()
	d.mu.Lock()
	skip := d.noSacct
	c, cached := d.elements[tag]
	d.mu.Unlock()
	if skip {
		return nil, nil
	}
	if cached && now.Sub(c.at) >= 0 && now.Sub(c.at) < elementListingTTL {
		for _, st := range c.sts {
			if st.GridID == gridID {
				return c.sts, nil
			}
		}
	}
	r, err := x.Run(ctx, SacctTaggedArgv(tag, now.Add(-30*24*time.Hour)), nil)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		msg := Message(r)
		d.mu.Lock()
		d.noSacct, d.sacctErr = true, msg
		d.mu.Unlock()
		x.Log.Info("sacct unavailable at this site; finding forgotten array elements by their id files", "err", msg)
		return nil, nil
	}
	sts, err := ParseSacctTagged(r.Stdout)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.elements == nil || len(d.elements) > 64 {
		d.elements = map[string]elementListing{}
	}
	d.elements[tag] = elementListing{at: now, sts: sts}
	d.mu.Unlock()
	return sts, nil
}
