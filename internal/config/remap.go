package config

// MaxRemapMoves bounds broker.remap.max_moves.
const MaxRemapMoves = 100

// validateRemap checks broker.remap: every value in range, and none set
// while the section is off (a setting that would change nothing is a
// mistake worth saying).
func validateRemap(r *Remap, bad func(key, format string, args ...any)) {
	if r.MinGain < 0 || r.MinGain > MaxInterval {
		bad("broker.remap.min_gain", "must be a duration from 0 (the default 10m) to %s, got %s", MaxInterval, r.MinGain)
	}
	if r.MaxMoves < 0 || r.MaxMoves > MaxRemapMoves {
		bad("broker.remap.max_moves", "must be a number of moves from 0 (the default 2) to %d, got %d", MaxRemapMoves, r.MaxMoves)
	}
	if r.Interval < 0 || r.Interval > MaxInterval {
		bad("broker.remap.interval", "must be a duration from 0 (every scheduling cycle) to %s, got %s", MaxInterval, r.Interval)
	}
	if !r.Enabled && (r.MinGain != 0 || r.MaxMoves != 0 || r.Interval != 0 || r.Policy != "" || r.PolicySHA256 != "") {
		bad("broker.remap.enabled", "is false, so min_gain, max_moves, interval, policy and policy_sha256 would change nothing: set enabled: true or remove them")
	}
}
