package daemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/users"
)

// credentialAdmin is the API's api.CredentialAdmin: the daemon's
// users.Credentials, for the sites it was configured with that it logs in
// to over SSH.
type credentialAdmin struct {
	*users.Credentials
	ssh   map[string]bool // site name -> reached over SSH
	names []string
	self  string // the daemon's own user, whose jobs use the sites' configured logins
}

func newCredentialAdmin(c *users.Credentials, sites []assemble.SiteSpec, self string) api.CredentialAdmin {
	a := &credentialAdmin{Credentials: c, ssh: map[string]bool{}, self: self}
	for _, s := range sites {
		a.names = append(a.names, s.Name)
		a.ssh[s.Name] = s.Open == nil && s.Backend != nil && s.Backend.Config.SSH != nil
	}
	return a
}

// Add stores n after checking that its site is one of the daemon's,
// reached over SSH.
func (a *credentialAdmin) Add(n users.NewCredential, now time.Time) (users.Credential, error) {
	sshOK, known := a.ssh[n.Site]
	switch {
	case n.User == a.self:
		return users.Credential{}, fmt.Errorf("%w: %s is the daemon's own user, whose jobs use each site's configured login (its ssh: block); a credential would never be used",
			bridge.ErrBadRequest, n.User)
	case !known:
		return users.Credential{}, fmt.Errorf("%w: %q; known sites: %s", bridge.ErrUnknownSite, n.Site, strings.Join(a.names, ", "))
	case !sshOK:
		var over []string
		for _, s := range a.names {
			if a.ssh[s] {
				over = append(over, s)
			}
		}
		slices.Sort(over)
		return users.Credential{}, fmt.Errorf("%w: site %s is not reached over SSH, so it has no per-user logins (sites reached over SSH: %s)",
			bridge.ErrBadRequest, n.Site, strings.Join(over, ", "))
	}
	return a.Credentials.Add(n, now)
}
