package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// loginBroker is a broker whose one site asks one question and accepts
// the answer "123456".
type loginBroker struct {
	funcBroker
	answers []string
}

func (b *loginBroker) SiteLogin(_ context.Context, site string, req api.LoginRequest) (*api.LoginReply, error) {
	switch {
	case site == "hold":
		return nil, fmt.Errorf("%w: site hold", api.ErrLoginUnsupported)
	case site != "s":
		return nil, fmt.Errorf("%w: %q", bridge.ErrUnknownSite, site)
	case req.Session == "":
		return &api.LoginReply{Session: "sess", Challenge: &transport.Challenge{Target: "u@h:22", Kind: transport.ChallengeKeyboard,
			Questions: []transport.Question{{Text: "One-time password: "}}}}, nil
	case req.Session != "sess":
		return nil, api.ErrLoginSession
	}
	b.answers = append(b.answers, req.Answers...)
	if len(req.Answers) != 1 || req.Answers[0] != "123456" {
		return nil, fmt.Errorf("site s: %w: the server rejected the answers", transport.ErrAuth)
	}
	return &api.LoginReply{Done: true}, nil
}

// POST /v1/sites/{name}/login carries a challenge out and the answers
// back, and maps a rejected answer, an unknown site or session and a site
// that cannot log in to their statuses; a broker without logins says so.
func TestSiteLoginRoute(t *testing.T) {
	b := &loginBroker{}
	ts := httptest.NewServer(api.NewServer(b, api.ServerOptions{}).Handler())
	defer ts.Close()
	cl := api.NewClient(ts.URL, "", ts.Client())
	ctx := context.Background()
	rep, err := cl.SiteLogin(ctx, "s", api.LoginRequest{})
	if err != nil || rep.Done || rep.Session != "sess" || rep.Challenge == nil || rep.Challenge.Questions[0].Echo ||
		!strings.Contains(rep.Challenge.Questions[0].Text, "One-time") {
		t.Fatalf("start: %+v %v", rep, err)
	}
	rep, err = cl.SiteLogin(ctx, "s", api.LoginRequest{Session: "sess", Answers: []string{"123456"}})
	if err != nil || !rep.Done {
		t.Fatalf("answer: %+v %v", rep, err)
	}
	for _, c := range []struct {
		site   string
		req    api.LoginRequest
		status int
		code   string
	}{
		{"s", api.LoginRequest{Session: "sess", Answers: []string{"000000"}}, 403, api.CodeLoginFailed},
		{"nosuch", api.LoginRequest{}, 400, api.CodeUnknownSite},
		{"s", api.LoginRequest{Session: "other", Answers: []string{"1"}}, 404, api.CodeNotFound},
		{"hold", api.LoginRequest{}, 409, api.CodeBadRequest},
		{"s", api.LoginRequest{Session: "sess", Answers: make([]string, 65)}, 400, api.CodeBadRequest},
	} {
		_, err := cl.SiteLogin(ctx, c.site, c.req)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != c.status || ae.Code != c.code {
			t.Errorf("%s %+v: %v, want %d %s", c.site, c.req.Session, err, c.status, c.code)
		}
	}
	ts2 := httptest.NewServer(api.NewServer(funcBroker{}, api.ServerOptions{}).Handler())
	defer ts2.Close()
	_, err = api.NewClient(ts2.URL, "", ts2.Client()).SiteLogin(ctx, "s", api.LoginRequest{})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 501 {
		t.Errorf("a broker without logins: %v", err)
	}
}
