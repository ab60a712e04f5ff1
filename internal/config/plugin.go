package config

import (
	"encoding/hex"
	"fmt"
)

// validatePlugin checks a site's isolate and plugin settings.
func (c *Config) validatePlugin(s *Site, k string) Errors {
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Source: c.Source, Key: key, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid})
	}
	if s.Isolate && s.Kind != KindSlurm && s.Kind != KindPBS {
		bad(k+".isolate", "only a slurm or pbs site's built-in backend runs isolated (a simulated site lives on the broker's clock), got kind %q", s.Kind)
	}
	p := s.Plugin
	if p == nil {
		return errs
	}
	if s.Isolate {
		bad(k+".isolate", "an external plugin already runs out of process; remove isolate or the plugin section")
	}
	if s.Kind == KindSim {
		bad(k+".plugin", "a simulated site cannot be an external plugin; use kind: the plugin's own kind")
	}
	if p.Path == "" {
		bad(k+".plugin.path", "missing; give the plugin executable")
	}
	if sum, err := hex.DecodeString(p.SHA256); err != nil || len(sum) != 32 {
		bad(k+".plugin.sha256", "must be the executable's SHA-256 as 64 hex digits, quoted (sha256: \"...\"; sha256sum %s), got %q", p.Path, p.SHA256)
	}
	if p.StartTimeout < 0 {
		bad(k+".plugin.start_timeout", "must be >= 0 (0 = 10s), got %s", p.StartTimeout)
	}
	return errs
}
