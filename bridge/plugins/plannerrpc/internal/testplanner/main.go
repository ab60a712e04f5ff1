// Command testplanner is the planner plugin plannerrpc's subprocess tests
// and benchmarks build and start: it serves one of coalloc's built-in
// planners by name.
//
//	testplanner [-plain] [-hang-after N] NAME
//	testplanner plugin serve planner NAME   (as gridsub's own command line)
//
// -plain hides the planner's sessions (policy.Incremental), so hosts get
// the snapshot path; -hang-after N makes every plan after the Nth (Plan or
// session pass) block until the process is killed: a hung plugin.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins/plannerrpc"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/coalloc"
)

func main() {
	plain := flag.Bool("plain", false, "serve the snapshot path only (no sessions)")
	hangAfter := flag.Int64("hang-after", 0, "block every plan after the Nth (0: never)")
	flag.Parse()
	args := flag.Args()
	if len(args) == 4 && args[0] == "plugin" && args[1] == "serve" && args[2] == "planner" {
		args = args[3:]
	}
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "usage: testplanner [-plain] [-hang-after N] NAME (one of %v)\n", coalloc.Names())
		os.Exit(2)
	}
	p, err := coalloc.ByName(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var pl policy.Planner = p
	h := &hang{after: *hangAfter}
	switch {
	case *plain && *hangAfter > 0:
		pl = &hangPlanner{Planner: p, h: h}
	case *plain:
		pl = plainPlanner{p}
	case *hangAfter > 0:
		pl = hangIncremental{&hangPlanner{Planner: p, h: h}, p.(policy.Incremental)}
	}
	plannerrpc.ServePlanner(pl)
}

type plainPlanner struct{ policy.Planner }

type hang struct {
	after int64
	n     atomic.Int64
}

// wait blocks forever once the count passes after.
func (h *hang) wait(ctx context.Context) {
	if h.n.Add(1) > h.after {
		<-ctx.Done() // the host gives up; the process is killed after
		time.Sleep(time.Hour)
	}
}

type hangPlanner struct {
	policy.Planner
	h *hang
}

func (p *hangPlanner) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	p.h.wait(ctx)
	return p.Planner.Plan(ctx, s)
}

type hangIncremental struct {
	*hangPlanner
	inc policy.Incremental
}

func (p hangIncremental) NewSession(s *policy.Snapshot) (policy.Session, error) {
	ss, err := p.inc.NewSession(s)
	if err != nil {
		return nil, err
	}
	return hangSession{ss, p.h}, nil
}

type hangSession struct {
	policy.Session
	h *hang
}

func (s hangSession) Plan(ctx context.Context, now time.Time) (*policy.Plan, error) {
	s.h.wait(ctx)
	return s.Session.Plan(ctx, now)
}
