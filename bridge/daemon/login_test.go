package daemon_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gridsub/gridsub/bridge/api"
)

// POST /v1/sites/{name}/login on the daemon: an unknown site is named
// with the sites there are; a site whose backend has no login (a simulated
// one) says it cannot be logged in to. The whole login (a TOTP sshd in
// front of SLURM) is cmd/gridsub's TestDaemonLoginTOTP.
func TestSiteLoginRefusals(t *testing.T) {
	state, sock := dirs(t)
	start(t, state, sock, 1)
	c := api.NewUnixClient(sock)
	ctx := context.Background()
	_, err := c.SiteLogin(ctx, "Nowhere", api.LoginRequest{})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != api.CodeUnknownSite {
		t.Errorf("unknown site: %v", err)
	}
	_, err = c.SiteLogin(ctx, "Beijing", api.LoginRequest{})
	if !errors.As(err, &ae) || ae.Status != 409 {
		t.Errorf("a simulated site: %v, want 409", err)
	}
	_, err = c.SiteLogin(ctx, "Beijing", api.LoginRequest{Session: "nope", Answers: []string{"x"}})
	if !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("an unknown session: %v, want 404", err)
	}
}
