package assemble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/users"
)

// CredentialBook is where the per-user, per-site identities are kept
// (users.Credentials).
//
// Contract: Get returns user's identity at site, if any; Files the paths
// of its key and certificate ("" for none), readable by this process.
// Safe for concurrent use.
type CredentialBook interface {
	Get(user, site string) (users.Credential, bool)
	Files(c users.Credential) (key, cert string)
}

// identities is the broker's bridge.Identities over a CredentialBook: the
// backend of a user's jobs at a site is the site's own description with
// the user's login, key, certificate, account and remote directory in
// place of the site's, built through the catalog like the site's (in
// process, isolated or external), once per (site, user, credential
// version). Calls go through the newest; a backend built for an older
// version stays open until the broker closes (a call may still be using
// it).
type identities struct {
	book  CredentialBook
	sites map[string]*SiteSpec
	build func(ctx context.Context, s *SiteSpec) (backends.Backend, io.Closer, error)

	mu       sync.Mutex
	built    map[[2]string]builtIdentity // (site, user)
	building map[[2]string]*sync.Mutex   // one build at a time per (site, user); others wait for it, not for each other
	closers  []io.Closer
	closed   bool
}

type builtIdentity struct {
	version string
	be      backends.Backend
}

var _ bridge.Identities = (*identities)(nil)

// newIdentities is the identities of book at sites, each built by build.
func newIdentities(book CredentialBook, sites map[string]*SiteSpec, build func(context.Context, *SiteSpec) (backends.Backend, io.Closer, error)) *identities {
	return &identities{book: book, sites: sites, build: build, built: map[[2]string]builtIdentity{}, building: map[[2]string]*sync.Mutex{}}
}

// ErrNoSSH: a per-user identity names a site not reached over SSH.
var ErrNoSSH = errors.New("the site is not reached over SSH")

// ErrClosed: the broker's identities were closed (it is shutting down).
var ErrClosed = errors.New("identities closed")

// Backend is bridge.Identities' Backend.
func (id *identities) Backend(ctx context.Context, site, owner string) (backends.Backend, error) {
	cr, ok := id.book.Get(owner, site)
	if !ok {
		return nil, nil
	}
	key := [2]string{site, owner}
	id.mu.Lock()
	if b, ok := id.built[key]; ok && b.version == cr.Version {
		id.mu.Unlock()
		return b.be, nil
	}
	km := id.building[key]
	if km == nil {
		km = &sync.Mutex{}
		id.building[key] = km
	}
	id.mu.Unlock()
	// A build may take a while (a plugin process, an SSH dial): other
	// users' identities are not held up by it.
	km.Lock()
	defer km.Unlock()
	id.mu.Lock()
	b, ok := id.built[key]
	id.mu.Unlock()
	if ok && b.version == cr.Version {
		return b.be, nil // built while this call waited
	}
	s, ok := id.sites[site]
	if !ok {
		return nil, fmt.Errorf("%w: no site %q", bridge.ErrUnknownSite, site)
	}
	spec, err := identitySpec(s, cr, id.book)
	if err != nil {
		return nil, err
	}
	be, c, err := id.build(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("building the backend of user %s at %s (login %s): %w", owner, site, cr.Login(), err)
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("building the backend of user %s at %s: %w", owner, site, ErrClosed)
	}
	if c != nil {
		id.closers = append(id.closers, c)
	}
	id.built[key] = builtIdentity{version: cr.Version, be: be}
	return be, nil
}

// Has is bridge.Identities' Has.
func (id *identities) Has(site, owner string) bool {
	_, ok := id.book.Get(owner, site)
	return ok
}

// identitySpec is site s described for the identity cr: the same site,
// logged in as cr's login with cr's key (and certificate) only — no agent,
// no prompter — charging cr's account, in cr's remote directory.
func identitySpec(s *SiteSpec, cr users.Credential, book CredentialBook) (*SiteSpec, error) {
	if s.Backend == nil || s.Backend.Config.SSH == nil || s.Open != nil {
		return nil, fmt.Errorf("%w: site %s has no ssh: block; per-user identities are for sites gridsub logs in to", ErrNoSSH, s.Name)
	}
	out := *s
	bs := *s.Backend
	bs.Prompter = nil
	ssh := *bs.Config.SSH
	key, cert := book.Files(cr)
	ssh.User = cr.Login()
	ssh.KeyFiles = []string{key}
	ssh.CertFiles = nil
	if cert != "" {
		ssh.CertFiles = []string{cert}
	}
	ssh.Agent = false
	bs.Config.SSH = &ssh
	if cr.Account != "" {
		bs.Config.Account = cr.Account
	}
	if cr.RemoteDir != "" {
		bs.Config.RemoteDir = cr.RemoteDir
	}
	bs.Env = slices.Clone(bs.Env)
	out.Backend = &bs
	return &out, nil
}

// Close closes every backend built.
func (id *identities) Close() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	var errs []error
	for _, c := range id.closers {
		errs = append(errs, c.Close())
	}
	id.closers, id.built, id.closed = nil, map[[2]string]builtIdentity{}, true
	return errors.Join(errs...)
}
