package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// Site logins (POST /v1/sites/{name}/login, `gridsub login SITE`): the
// daemon runs the site's login on a goroutine of its own, whose Prompter
// hands each challenge to the waiting API request and waits for the next
// request's answers. The answers pass through memory only; nothing of
// them is logged or stored. The connection the login makes is the site's
// from then on (transport.Client.Login), kept with keepalives.

// Bounds of a login session.
const (
	loginAnswerWait = 2 * time.Minute  // a challenge unanswered this long ends the session
	loginMax        = 10 * time.Minute // a whole login
	// loginStepWait is how long one API request waits for the next step:
	// below the API's WriteTimeout (api.DefaultWriteTimeout, 60s), so the
	// answer always reaches the client. A login still dialing then goes on
	// (its connection is kept); the next gridsub login finds it connected.
	loginStepWait = 45 * time.Second
)

var _ api.SiteLoginer = (*service)(nil)

// loginer is a backend whose connection can be logged in to
// (sshbatch.Backend over a transport.Client).
type loginer interface {
	Login(ctx context.Context, p transport.Prompter) (already bool, err error)
}

type loginSession struct {
	site   string
	ask    chan transport.Challenge
	answer chan []string
	result chan loginResult // buffered: the login goroutine never blocks on it
}

type loginResult struct {
	already bool
	err     error
}

// logins are the sessions under way, by id.
type logins struct {
	mu   sync.Mutex
	byID map[string]*loginSession
}

func (l *logins) add(s *loginSession) string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID == nil {
		l.byID = map[string]*loginSession{}
	}
	l.byID[id] = s
	return id
}

func (l *logins) get(id, site string) *loginSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.byID[id]; s != nil && s.site == site {
		return s
	}
	return nil
}

func (l *logins) drop(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byID, id)
}

// SiteLogin implements api.SiteLoginer.
func (s *service) SiteLogin(ctx context.Context, site string, req api.LoginRequest) (*api.LoginReply, error) {
	if req.Session != "" {
		ls := s.logins.get(req.Session, site)
		if ls == nil {
			return nil, fmt.Errorf("%w: site %s", api.ErrLoginSession, site)
		}
		select {
		case ls.answer <- req.Answers:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(loginStepWait):
			return nil, fmt.Errorf("%w: site %s: no question is waiting for an answer", api.ErrLoginSession, site)
		}
		return s.loginStep(ctx, req.Session, ls)
	}
	be, ok := s.b.Site(site)
	if !ok {
		return nil, fmt.Errorf("%w: %q (the sites are %v)", bridge.ErrUnknownSite, site, s.b.SiteNames())
	}
	lg, ok := be.(loginer)
	if !ok {
		return nil, fmt.Errorf("%w: site %s (%T; a site served by a plugin process logs in on its own)", api.ErrLoginUnsupported, site, be)
	}
	ls := &loginSession{site: site, ask: make(chan transport.Challenge), answer: make(chan []string),
		result: make(chan loginResult, 1)}
	id := s.logins.add(ls)
	go func() {
		lctx, cancel := context.WithTimeout(context.Background(), loginMax)
		defer cancel()
		p := transport.PrompterFunc(func(pctx context.Context, ch transport.Challenge) ([]string, error) {
			select {
			case ls.ask <- ch:
			case <-pctx.Done():
				return nil, pctx.Err()
			case <-time.After(loginStepWait):
				return nil, errors.New("nobody is waiting for the question (gridsub login went away)")
			}
			select {
			case a := <-ls.answer:
				return a, nil
			case <-pctx.Done():
				return nil, pctx.Err()
			case <-time.After(loginAnswerWait):
				return nil, fmt.Errorf("no answer within %s", loginAnswerWait)
			}
		})
		already, err := lg.Login(lctx, p)
		ls.result <- loginResult{already, err}
		if err != nil {
			s.d.log.Warn("site login failed", "site", site, "err", err)
			return
		}
		s.d.log.Info("site login done; connection kept", "site", site, "already_connected", already)
		s.d.post(TaskHealth) // the site's status shows it at once
		s.d.post(TaskCycle)
	}()
	return s.loginStep(ctx, id, ls)
}

// loginStep waits for the session's next challenge or its end.
func (s *service) loginStep(ctx context.Context, id string, ls *loginSession) (*api.LoginReply, error) {
	select {
	case ch := <-ls.ask:
		return &api.LoginReply{Session: id, Challenge: &ch}, nil
	case r := <-ls.result:
		s.logins.drop(id)
		if r.err != nil {
			return nil, fmt.Errorf("site %s: %w", ls.site, r.err)
		}
		return &api.LoginReply{Done: true, Already: r.already}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(loginStepWait):
		s.logins.drop(id)
		return nil, fmt.Errorf("%w: site %s: the login did not move for %s", api.ErrLoginSession, ls.site, loginStepWait)
	}
}
