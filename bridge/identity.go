package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/gridsub/gridsub/backends"
)

// Identities gives the backend through which one user's jobs run at a
// site: a per-user, per-site identity (the user's own login, key and
// account there; docs/users.md, "Each user's own site account").
//
// Contract: Backend returns the backend for owner's jobs at site — built
// over owner's own credential, the same value for the same (site, owner)
// while that credential does not change — or (nil, nil) when owner has no
// identity of their own at site: their jobs use the site's configured
// backend. An error means owner has an identity at site that cannot be
// used now (its files unreadable, its backend not built); it names the
// site and the user and never holds a secret. Backend may block (a first
// call builds the backend: a plugin process, an SSH dial) and is safe for
// concurrent use. After a credential changes, Backend returns a backend
// of the new one (the user's jobs at the site are then asked about
// through it: a new key of the same login sees the same jobs); one it
// returned before stays usable until whoever made the Identities closes
// it.
//
// Has reports, without I/O, whether owner has an identity of their own at
// site (the site's own accounts are then not theirs to be judged by).
type Identities interface {
	Backend(ctx context.Context, site, owner string) (backends.Backend, error)
	Has(site, owner string) bool
}

// ErrIdentity: a user's own identity at a site (Options.Identities)
// cannot be used now — its files unreadable, its backend not built.
// Always wrapped together with backends.ErrUnavailable: nothing of that
// user's was sent to the site, and nothing is sent under another identity
// instead; the user's jobs there wait, and the site is not judged down
// for it.
var ErrIdentity = errors.New("the user's site identity cannot be used")

// backendFor is the backend of owner's jobs at site s: owner's own
// identity's (Options.Identities), or the site's configured one — for the
// daemon's own user (owner "" or Options.Owner), a simulated site, a
// broker without identities, or a user with none at s. An identity that
// cannot be used is an error wrapping backends.ErrUnavailable: the user's
// calls at s wait for it; nothing is sent under another identity.
func (st *siteTable) backendFor(ctx context.Context, s int, owner string) (backends.Backend, error) {
	if st.ids == nil || owner == "" || owner == st.self || st.sites[s].Simulated {
		return st.sites[s].Backend, nil
	}
	be, err := st.ids.Backend(ctx, st.names[s], owner)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: site %s, user %s: %w", backends.ErrUnavailable, ErrIdentity, st.names[s], owner, err)
	}
	if be == nil {
		return st.sites[s].Backend, nil
	}
	return be, nil
}

// identityOwner is the owner whose identity a call about j uses: "" when
// the broker has no identities (every call goes through the site's
// backend, in one group per site).
func (st *siteTable) identityOwner(j *Job) string {
	if st.ids == nil || j == nil {
		return ""
	}
	return j.Req.Owner
}
