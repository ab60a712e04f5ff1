package backends

import (
	"fmt"
	"strings"
)

// MissingName says that a site's configuration names a partition, queue
// or account the site does not have: the site, the field as the
// configuration spells it (sites.NAME.FIELD), the name, and what the site
// offers instead. A backend's Info fails with it (wrapped in ErrRejected)
// when the site's own configured partition or queue is not there.
func MissingName(site, field, name string, have []string) string {
	return fmt.Sprintf("site %s has no %s %q (sites.%s.%s in the configuration); it has: %s", site, field, name, site, field, Offers(have))
}

// Offers lists names for a message: "a, b, c", or "none".
func Offers(have []string) string {
	if len(have) == 0 {
		return "none"
	}
	return strings.Join(have, ", ")
}
