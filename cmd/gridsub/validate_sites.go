package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/internal/config"
)

// siteProbe is what `gridsub validate` learnt from the configured batch
// sites: each one's Info, or the error it answered with. nil: no site was
// asked (--offline, or only simulated sites).
type siteProbe struct {
	infos map[string]*backends.SiteInfo
	errs  map[string]error
	names []string // every configured site, in order
}

// probeWait bounds how long validate waits for the sites.
const probeWait = 30 * time.Second

// probeSites asks every configured slurm or pbs site for its Info, as
// `gridsub sites` does; simulated sites are not asked (their partitions
// are their configuration's). A site that cannot be built or does not
// answer is left unjudged, said on stderr.
func probeSites(ctx context.Context, g *globals, cfg *config.Config) *siteProbe {
	real := slices.ContainsFunc(cfg.Sites, func(s config.Site) bool { return s.Kind != config.KindSim })
	if !real {
		return nil
	}
	spec, err := specFromConfig(cfg, g.logger())
	if err != nil {
		fmt.Fprintf(g.stderr, "validate: sites not asked (%v): partitions and queues not checked\n", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	env, err := assemble.Build(ctx, spec, assemble.Options{Logger: g.logger()})
	if err != nil {
		fmt.Fprintf(g.stderr, "validate: sites not reached (%v): partitions and queues not checked\n", err)
		return nil
	}
	defer env.Close()
	p := &siteProbe{infos: map[string]*backends.SiteInfo{}, errs: map[string]error{}}
	for _, s := range cfg.Sites {
		p.names = append(p.names, s.Name)
		if s.Kind == config.KindSim {
			continue
		}
		be, ok := env.Broker.Site(s.Name)
		if !ok {
			continue
		}
		in, err := be.Info(ctx)
		switch {
		case err == nil:
			p.infos[s.Name] = in
		case bridge.Misconfigured(err):
			p.errs[s.Name] = err
		default:
			fmt.Fprintf(g.stderr, "validate: site %s did not answer (%v): its partitions or queue not checked\n", s.Name, err)
		}
	}
	return p
}

// checkOptions is bridge.CheckSiteOptions against the sites asked, each
// problem prefixed with the file's path.
func (p *siteProbe) checkOptions(path string, req *bridge.Request) error {
	if p == nil {
		return nil
	}
	err := bridge.CheckSiteOptions(req, p.infos)
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", path, err)
}

// misconfigured adds, for every site the job may use whose own configured
// partition or queue is missing, the site's words: to errs when the job
// may run at no other site (it reports true: the job can never run as
// configured), else to warning.
func (p *siteProbe) misconfigured(req *bridge.Request, path string, errs *[]string, warning *string) bool {
	if p == nil || len(p.errs) == 0 {
		return false
	}
	allowed := req.Sites
	if len(allowed) == 0 {
		allowed = p.names
	}
	var bad []string
	for _, s := range allowed {
		if err := p.errs[s]; err != nil {
			bad = append(bad, "site "+s+" is misconfigured: "+strings.TrimPrefix(err.Error(), backends.ErrRejected.Error()+": "))
		}
	}
	switch {
	case len(bad) == 0:
		return false
	case len(bad) == len(allowed):
		for _, b := range bad {
			*errs = append(*errs, path+": "+b)
		}
		return true
	}
	*warning = joinWarnings(*warning, strings.Join(bad, "; "))
	return false
}

// joinWarnings joins two warnings with "; ", either possibly empty.
func joinWarnings(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
