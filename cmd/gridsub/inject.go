package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/simbackend"
)

// failureSpec is one --inject-failure: SITE@DELAY[+REPAIR].
type failureSpec struct {
	site          string
	delay, repair time.Duration // repair 0: never
}

// parseFailure parses SITE@DELAY[+REPAIR] ("Beijing@30s", "Beijing@30s+10m").
func parseFailure(s string) (failureSpec, error) {
	var f failureSpec
	site, when, ok := strings.Cut(s, "@")
	if !ok || site == "" || when == "" {
		return f, fmt.Errorf("--inject-failure %q: want SITE@DELAY or SITE@DELAY+REPAIR, e.g. Beijing@30s or Beijing@30s+10m", s)
	}
	f.site = site
	d, r, hasRepair := strings.Cut(when, "+")
	var err error
	if f.delay, err = time.ParseDuration(d); err != nil || f.delay < 0 {
		return f, fmt.Errorf("--inject-failure %q: DELAY %q is not a duration >= 0 (30s, 5m)", s, d)
	}
	if hasRepair {
		if f.repair, err = time.ParseDuration(r); err != nil || f.repair <= 0 {
			return f, fmt.Errorf("--inject-failure %q: REPAIR %q is not a duration > 0 (10m)", s, r)
		}
	}
	return f, nil
}

// injectFailures schedules each --inject-failure on the simulated clock,
// relative to now (the submission): the site fails (simbackend.Site.Fail:
// its running jobs end failed with NodeFail and its queued ones with
// SiteFailed, as a SLURM site reports jobs of failed nodes, and it refuses
// work) and, with a REPAIR, comes back (Site.Repair).
func injectFailures(env *assemble.Env, specs []string, now time.Time) error {
	if len(specs) == 0 {
		return nil
	}
	if env.Engine == nil {
		return fmt.Errorf("--inject-failure works on simulated sites only; on real sites stop a site's slurmctld or sshd instead")
	}
	for _, s := range specs {
		f, err := parseFailure(s)
		if err != nil {
			return err
		}
		be, ok := env.Broker.Site(f.site)
		site, sim := be.(*simbackend.Site)
		if !ok || !sim {
			return fmt.Errorf("--inject-failure %q: no simulated site %q; sites: %s", s, f.site, strings.Join(env.Broker.SiteNames(), ", "))
		}
		why := fmt.Sprintf("failure injected at +%s", f.delay)
		env.Engine.At(now.Add(f.delay), func() { site.Fail(why) })
		if f.repair > 0 {
			env.Engine.At(now.Add(f.delay+f.repair), site.Repair)
		}
	}
	return nil
}
