package bridge

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// A daemon serves several users, but reads inputs and writes outputs on
// its own machine as one (its own) user. So that no user reaches another's
// files through it, the jobs of a user other than the daemon's own
// (Options.Owner) are held to that user's rights:
//
//   - an input is read only when the user's local account could read it
//     itself (every directory on its path searchable, the file readable,
//     by its mode bits); a user with no account on this machine has no
//     local inputs;
//   - outputs go below <output_root>/<user>/ only (a relative output
//     directory is taken there), so one user cannot write into another's;
//     a daemon running as root hands the files it writes there, and the
//     directories it made for them, to the user's account.

// otherUser reports whether owner is a user other than the daemon's own
// (only a daemon, which knows its own user, tells them apart).
func (ik *intake) otherUser(owner string) bool {
	return ik.opts.Owner != "" && owner != "" && owner != ik.opts.Owner
}

// fileUser is a local account whose rights a job's files are checked
// against.
type fileUser struct {
	name     string
	uid, gid int
	groups   []int
}

// lookupFileUser finds the local account of name.
func lookupFileUser(name string) (*fileUser, error) {
	var u *user.User
	var err error
	if id, ok := strings.CutPrefix(name, "uid:"); ok {
		u, err = user.LookupId(id)
	} else {
		u, err = user.Lookup(name)
	}
	if err != nil {
		return nil, err
	}
	fu := &fileUser{name: name}
	fu.uid, _ = strconv.Atoi(u.Uid)
	fu.gid, _ = strconv.Atoi(u.Gid)
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if n, err := strconv.Atoi(g); err == nil {
			fu.groups = append(fu.groups, n)
		}
	}
	return fu, nil
}

// allows reports whether u has the rights want (a mask of 4 read, 2
// write, 1 search/execute) on a file with info fi, by its mode bits.
func (u *fileUser) allows(fi fs.FileInfo, want fs.FileMode) bool {
	if u.uid == 0 {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	perm := fi.Mode().Perm()
	switch {
	case int(st.Uid) == u.uid:
		perm >>= 6
	case int(st.Gid) == u.gid || slices.Contains(u.groups, int(st.Gid)):
		perm >>= 3
	}
	return perm&want == want
}

// mayRead says why u could not read the file at p (resolved, no links),
// or nil: every directory above it searchable, the file readable.
func (u *fileUser) mayRead(p string) error {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !u.allows(fi, 1) {
			return fmt.Errorf("user %s may not search %s, so cannot read %s themselves", u.name, d, p)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	fi, err := os.Stat(p)
	if err != nil || !u.allows(fi, 4) {
		return fmt.Errorf("user %s may not read %s themselves", u.name, p)
	}
	return nil
}

// inputReader is whose rights a request's local inputs are read with:
// nothing to check for the daemon's own user; else the owner's local
// account, looked up once per request.
type inputReader struct {
	owner string
	other bool
	u     *fileUser
	err   error // the owner has no local account
}

// inputReader is the inputReader of owner's request.
func (ik *intake) inputReader(owner string) *inputReader {
	r := &inputReader{owner: owner, other: ik.otherUser(owner)}
	if r.other {
		r.u, r.err = lookupFileUser(owner)
	}
	return r
}

// check refuses an input (resolved path r, asked as p) that the owner
// could not read themselves.
func (ir *inputReader) check(p, r string) error {
	if !ir.other {
		return nil
	}
	if ir.err != nil {
		return &jobrules.Error{Msg: fmt.Sprintf("%s: user %s has no account on the broker's machine, so has no local files to stage (inputs that lie at a site need none)", p, ir.owner),
			Err: jobrules.ErrOutsideRoot}
	}
	if err := ir.u.mayRead(r); err != nil {
		return &jobrules.Error{Msg: fmt.Sprintf("%s: %v; the daemon reads inputs with its user's rights only for its user", p, err), Err: jobrules.ErrOutsideRoot}
	}
	return nil
}

// userOutputRoot is the directory owner's outputs go below: the output
// root itself for the daemon's own user, <output_root>/<owner> for another
// (checked to lie inside the output root once its links are resolved).
func (ik *intake) userOutputRoot(owner string) ([]string, error) {
	if !ik.otherUser(owner) {
		return ik.outRoot, nil
	}
	if owner == "." || owner == ".." || strings.ContainsAny(owner, "/\x00") {
		return nil, &jobrules.Error{Msg: fmt.Sprintf("user %q cannot have a directory of outputs", owner), Err: jobrules.ErrOutsideRoot}
	}
	base := filepath.Join(ik.outRoot[0], owner)
	r, err := jobrules.Confine(base, ik.outRoot, "the output root")
	if err != nil {
		return nil, err
	}
	return []string{r}, nil
}

// handOver gives the files of a fetch (paths) and the directories above
// them up to the user's output root, where the daemon made them, to owner's local
// account: only a daemon running as root can, and only for another user
// with an account here. What cannot be handed over is said in the error.
func (ft *fetcher) handOver(owner string, paths []string) error {
	if os.Geteuid() != 0 || len(paths) == 0 || !ft.otherUser(owner) {
		return nil
	}
	u, err := lookupFileUser(owner)
	if err != nil {
		return nil // no account here: the files stay the daemon's, below the user's own directory
	}
	roots, err := ft.userOutputRoot(owner)
	if err != nil {
		return err
	}
	top := roots[0]
	seen := map[string]bool{}
	var errs []string
	give := func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		fi, err := os.Lstat(p)
		if err != nil {
			return
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			return // not made by the daemon: not ours to give
		}
		if err := os.Lchown(p, u.uid, u.gid); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, p := range paths {
		give(p)
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			if _, in := jobrules.Within(top, d); !in {
				break
			}
			give(d)
			if d == top {
				break
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("handing the outputs to user %s: %s", owner, strings.Join(errs, "; "))
	}
	return nil
}
