package bridge

import (
	"sync"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// siteTable is what the broker knows of its sites: their configuration and
// declared capabilities (the backends), their names and indices, the
// configured links and the multi-site factor, and what was last seen of
// each — size and node shape (known/seen, for feasibility and for a site
// that is down), node count (capacity, for reservations), trust, the
// cycle's Info answers (snapSites/infoOK/infoErr), the measured uplinks,
// and the outages of sites that stop answering (downSince/lostAt).
//
// The configuration is read-only after New. The observations are guarded
// by the ledger's lock, except the pushed changes (notes, stale), which
// have their own lock, notesMu, so that a backend can report from any
// goroutine.
type siteTable struct {
	sites     []SiteConfig
	siteIdx   map[string]int
	names     []string
	links     [][]policy.Link // Options.Links; nil = free
	multiSite float64         // Options.MultiSite
	polling   bool            // some site must be polled (does not push its changes)

	capacity  []int         // nodes per site as last seen; 0 = not known yet
	trust     []float64     // per-site trust for the policy (SetTrust); 0 = unset
	known     []policy.Site // each site's size and node shape as last seen, for feasible (feasible.go)
	seen      []bool        // known[s] was filled from an Info
	snapSites []policy.Site // the sites of the cycle's snapshot, reused
	infoOK    []bool        // the cycle's Info of site s answered
	infoErr   []error
	uplinkBuf []policy.Link

	tiers     *TierOptions // Options.Tiers: outages count only with tiers on
	downSince []time.Time  // per site: start of the current run of failed status calls (outage.go)
	lostAt    []time.Time  // per site: the last cycle a loss was reported (losses.go)

	notesMu    sync.Mutex
	notes      []note // pushed changes not yet applied
	spareNotes []note // the other buffer of notes
	stale      uint64 // bit s: pushing site s changed since its Info was read
}
