package assemble

// PolicyNames names the policy of each extension point beside the
// planner (broker.feasibility, admission, trust, tiering, remap.policy,
// order):
// a built-in ("" = the kind's default, registry.Default) or a policy
// plugin reference (plugin:/path/to/exe ARGS, plugin:builtin:NAME).
// Open (policy_plugins.go) builds them.
type PolicyNames struct {
	Feasibility, Admission, Trust, Tiering, Remap, Order string
}
