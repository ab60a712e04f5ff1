package api

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// The status page: GET / on every listener the API serves (the socket and
// the TCP listener, behind the same authentication), a read-only HTML view
// of the daemon for a browser: the sites with their health, load and
// trust; the queue (queued and held jobs); the jobs at the sites; the
// latest jobs with their placement and last events; the active advance
// reservations. It is rendered on the server by html/template (every value
// escaped for its context), holds no script and forbids any by its
// Content-Security-Policy, and refreshes itself every PageRefresh seconds
// with a meta tag.

// PageRefresh is how often the status page reloads itself (seconds).
const PageRefresh = 5

// Page bounds: the rows of each table.
const (
	pageQueue  = 100
	pageLive   = 100
	pageRecent = 30
	pageEvents = 5
)

//go:embed status.html.tmpl
var pageSource string

// pageTmpl is parsed on first use: every client of this package (each
// front-end process) would otherwise parse it at start.
var pageTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("status").Funcs(template.FuncMap{
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
		"tsp": func(t *time.Time) string {
			if t == nil {
				return "-"
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
		"intp": func(p *int) string {
			if p == nil {
				return "-"
			}
			return fmt.Sprint(*p)
		},
		"trust": func(p *float64) string {
			if p == nil {
				return "not computed"
			}
			return fmt.Sprintf("%.2f", *p)
		},
		"down": func(status string) bool { return strings.HasPrefix(status, SiteUnreachable) },
		"rel":  func(r *SiteReliability) string { return r.Summary() },
		"last": func(evs []bridge.Event) []bridge.Event {
			if len(evs) > pageEvents {
				return evs[len(evs)-pageEvents:]
			}
			return evs
		},
		"sites": func(j *bridge.Job) string {
			if s := j.Sites(); s != "" {
				return s
			}
			return "-"
		},
		"note": func(j *bridge.Job) string {
			switch {
			case j.State == bridge.Held:
				return j.Waiting
			case j.Group != nil && !j.State.Final():
				g := j.Group
				ended := 0
				for _, n := range g.Counts {
					ended += n
				}
				return fmt.Sprintf("%s: %d of %d elements ended, %d unfinished", g.Kind, ended, g.Total, g.Made-ended)
			}
			return j.Reason
		},
	}).Parse(pageSource))
})

// pageData is what the template renders.
type pageData struct {
	Now          time.Time
	Refresh      int
	Sites        []Site
	SitesErr     string
	Queue        []*bridge.Job
	Live         []*bridge.Job
	Recent       []*bridge.Job
	Reservations []Reservation
	ResvNote     string
	Errors       []string
}

// page serves the status page.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	d := s.pageData(r.Context(), caller(r))
	var buf bytes.Buffer
	if err := pageTmpl().Execute(&buf, d); err != nil {
		s.log.Error("rendering the status page", "err", err)
		http.Error(w, "the status page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// pageData is what the page shows p: their own jobs and reservations
// (every one to an administrator).
func (s *Server) pageData(ctx context.Context, p Principal) pageData {
	d := pageData{Now: time.Now(), Refresh: PageRefresh}
	if sr, ok := s.b.(SiteReporter); ok {
		sites, err := sr.SiteStatus(ctx)
		if err != nil {
			d.SitesErr = err.Error()
		}
		d.Sites = sites
	}
	if d.Sites == nil {
		for _, n := range s.b.SiteNames() {
			d.Sites = append(d.Sites, Site{Name: n, Status: "no health probes recorded by this broker"})
		}
	}
	list := func(f bridge.Filter) []*bridge.Job {
		js, err := s.listFor(ctx, p, f)
		if err != nil {
			d.Errors = append(d.Errors, err.Error())
		}
		return js
	}
	d.Queue = list(bridge.Filter{States: []bridge.JobState{bridge.Queued, bridge.Held, bridge.Reserved}, Limit: pageQueue})
	d.Live = list(bridge.Filter{States: []bridge.JobState{bridge.Submitting, bridge.Dispatched, bridge.Running}, Limit: pageLive})
	d.Recent = list(bridge.Filter{Newest: true, Limit: pageRecent, Events: true})
	if rl, ok := s.b.(ReservationLister); ok {
		rs, err := rl.Reservations(ctx, true)
		if err != nil {
			d.Errors = append(d.Errors, err.Error())
		}
		d.Reservations = s.ownReservations(p, rs)
	} else {
		d.ResvNote = "this broker keeps no reservations"
	}
	return d
}
