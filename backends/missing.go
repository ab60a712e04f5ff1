package backends

import (
	"fmt"
	"slices"
	"strings"
)

// MissingName says that a site's configuration names a partition, queue
// or account the site does not have: the site, what the site calls it
// (word: "partition", "queue", "account"), the name, the key of the
// site's configuration that set it (sites.NAME.KEY), and what the site
// offers instead. A backend's Info fails with it (wrapped in ErrRejected)
// when the site's own configured partition or queue is not there.
func MissingName(site, word, key, name string, have []string) string {
	return fmt.Sprintf("site %s has no %s %q (sites.%s.%s in the configuration); it has: %s", site, word, name, site, key, Offers(have))
}

// Offers lists names for a message, sorted (a batch system lists its
// partitions in no fixed order): "a, b, c", or "none".
func Offers(have []string) string {
	if len(have) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(slices.Values(have)), ", ")
}
