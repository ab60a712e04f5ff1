package policy

// Kind names an extension point: what a built-in or a plugin implements.
type Kind string

// The extension points, each one interface of this package.
const (
	KindPlanner     Kind = "planner"     // Planner (and Incremental): placement
	KindFeasibility Kind = "feasibility" // Feasibility: can a request ever run
	KindAdmission   Kind = "admission"   // Admission: reservation admission and binding
	KindTrust       Kind = "trust"       // Trust: outcomes in, scores out
	KindTiering     Kind = "tiering"     // Tiering: tier rule and copy plans
	KindRemap       Kind = "remap"       // Remap: moves of waiting jobs
	KindOrder       Kind = "order"       // Order: the queue's order (fair share)
)

// Kinds lists the extension points in a fixed order.
func Kinds() []Kind {
	return []Kind{KindPlanner, KindFeasibility, KindAdmission, KindTrust, KindTiering, KindRemap, KindOrder}
}
