package api

import (
	"context"
	"net/http"
	"time"
)

// PluginReporter is optionally implemented by a Broker that knows what
// serves its sites' backends (the daemon does). Without it GET /v1/plugins
// answers an empty list.
//
// Contract: Plugins returns one Plugin per site, in configuration order,
// then the planner plugin (Kind "planner") if the broker plans with one,
// then each policy plugin beside it (Kind "feasibility", "admission",
// "trust", "tiering" or "remap", in that order), from what is loaded now; it does not call the plugins. It is safe for
// concurrent use.
type PluginReporter interface {
	Plugins(ctx context.Context) ([]Plugin, error)
}

// PolicyChoiceReporter is optionally implemented by a Broker that knows
// what its configuration chose for each policy kind (the daemon does):
// GET /v1/plugins then answers it as policies.
type PolicyChoiceReporter interface {
	// ConfiguredPolicies is by policy kind ("placement", "feasibility",
	// "admission", "trust", "tiering", "remap"): the built-in's name or
	// the plugin reference (plugin:/path ARGS, plugin:builtin:NAME); the
	// remap policy ends in " (off)" while remapping is off.
	ConfiguredPolicies() map[string]string
}

// Plugin is one loaded plugin in GET /v1/plugins.
type Plugin struct {
	Name     string `json:"name"`             // the site it serves, or "planner", or the policy kind
	Kind     string `json:"kind"`             // "backend", "planner" or a policy kind ("trust", ...)
	Mode     string `json:"mode"`             // "in-process", "isolated" or "external"
	Impl     string `json:"impl"`             // the built-in's name or the executable's path
	Version  string `json:"version"`          // as the plugin reported it
	SHA256   string `json:"sha256,omitempty"` // verified before the executable started
	Pid      int    `json:"pid,omitempty"`    // the plugin process now (absent in process)
	Health   string `json:"health"`           // "ok", "restarting" or "down"
	Reason   string `json:"reason,omitempty"` // why it is restarting or down
	Restarts int    `json:"restarts"`         // restarts since the daemon started
	// Fallback is a planner plugin's fallback built-in; FallbackActive
	// says it plans now, in place of the plugin.
	Fallback       string `json:"fallback,omitempty"`
	FallbackActive bool   `json:"fallback_active,omitempty"`
}

// PluginsResponse is the answer to GET /v1/plugins.
type PluginsResponse struct {
	Plugins []Plugin `json:"plugins"`
	// Policies is what the configuration chose for each policy kind
	// (PolicyChoiceReporter); absent when the broker does not say.
	Policies map[string]string `json:"policies,omitempty"`
	Time     time.Time         `json:"time"`
}

func (s *Server) plugins(w http.ResponseWriter, r *http.Request) {
	resp := PluginsResponse{Plugins: []Plugin{}, Time: time.Now()}
	if pr, ok := s.b.(PluginReporter); ok {
		ps, err := pr.Plugins(r.Context())
		if err != nil {
			s.failErr(w, r, err)
			return
		}
		if ps != nil {
			resp.Plugins = ps
		}
	}
	if pc, ok := s.b.(PolicyChoiceReporter); ok {
		resp.Policies = pc.ConfiguredPolicies()
	}
	writeJSON(w, http.StatusOK, resp)
}

// Plugins returns what serves each of the daemon's sites, its planner
// plugin and policy plugins, and its policy choices (GET /v1/plugins).
func (c *Client) Plugins(ctx context.Context) (*PluginsResponse, error) {
	var r PluginsResponse
	if err := c.do(ctx, http.MethodGet, "/v1/plugins", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
