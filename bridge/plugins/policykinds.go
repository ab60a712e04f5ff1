package plugins

// The policy extension points a plugin executable may serve, beside
// KindPlanner (placement). Each is a key of the plugin map and the KIND of
// `gridsub plugin serve KIND NAME`; bridge/plugins/policyrpc carries them.
const (
	KindFeasibility = "feasibility" // policy feasibility: may this job run on that site at all
	KindAdmission   = "admission"   // policy admission (DRRM/SRRM): take a job or a reservation in
	KindTrust       = "trust"       // a trust model: per-site trust from outcomes
	KindTiering     = "tiering"     // QoS tiers: a job's tier and its copy plan
	KindRemap       = "remap"       // remapping: move waiting or failed work elsewhere
	KindOrder       = "order"       // queue order: which waiting job is considered first (fair share)
)

// KindPlacement is the name `gridsub plugins` gives the placement kind; its
// plugin-map key stays KindPlanner ("planner") for the plugins built
// before the other kinds.
const KindPlacement = "placement"

// ExtensionPoints are the seven policy extension points, in the order `gridsub
// plugins` lists them.
func ExtensionPoints() []string {
	return []string{KindPlacement, KindFeasibility, KindAdmission, KindTrust, KindTiering, KindRemap, KindOrder}
}
