package main

import (
	"fmt"
	"strings"

	"github.com/gridsub/gridsub/bridge"
)

// copiesText names the copies of a QoS-tiered job ("replica at
// Beijing:2 + replica at Shanghai:2", "primary at Beijing:1 + passive
// backup at Shanghai:1"), or "" for a job that runs as one copy.
func copiesText(j *bridge.Job) string {
	var parts []string
	for _, c := range j.Comps {
		if c.Role == "" {
			return ""
		}
		role := c.Role
		switch {
		case c.Passive && !c.Due.IsZero():
			role += " (starts " + c.Due.UTC().Format("15:04:05") + ")"
		case c.Passive:
			role = "passive " + role
		}
		parts = append(parts, fmt.Sprintf("%s at %s:%d", role, c.Site, c.Nodes))
	}
	return strings.Join(parts, " + ")
}
