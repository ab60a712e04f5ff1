//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// hostConfig is the part of the site configuration the host sends a backend
// plugin when it configures it (JSON; bridge/plugins.BackendConfig) that
// this site reads. Other fields are ignored.
type hostConfig struct {
	Name         string          `json:"name"`
	Nodes        int             `json:"nodes"`
	CoresPerNode int             `json:"cores_per_node"`
	RemoteDir    string          `json:"remote_dir"`
	Options      json.RawMessage `json:"options"`
}

// Options are the site's `plugin.options` in gridsub's configuration.
type Options struct {
	Root           string   `json:"root"`             // job directories (default: the site's remote_dir)
	Shell          string   `json:"shell"`            // Config.Shell
	KillGrace      string   `json:"kill_grace"`       // Config.KillGrace as a Go duration ("10s")
	MaxInputBytes  int64    `json:"max_input_bytes"`  // Config.MaxInputBytes
	MaxOutputBytes int64    `json:"max_output_bytes"` // Config.MaxOutputBytes
	MaxOutputFiles int      `json:"max_output_files"` // Config.MaxOutputFiles
	PassEnv        []string `json:"pass_env"`         // Config.PassEnv
}

// FromConfig builds a Site from the host's configuration of the site (the
// JSON a backend plugin receives at Configure): name, nodes (the slots),
// cores_per_node, remote_dir (the root, unless options.root is given) and
// options (Options; an unknown key is an error). Its signature is the
// plugin layer's backend factory, so a plugin main can be
// plugins.ServeBackendFactory(local.FromConfig, version).
func FromConfig(_ context.Context, raw []byte) (backends.Backend, error) {
	var h hostConfig
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("%w: %w: the site configuration is not valid JSON: %w", ErrConfig, backends.ErrInvalidSpec, err)
	}
	var o Options
	if len(h.Options) > 0 && !bytes.Equal(bytes.TrimSpace(h.Options), []byte("null")) {
		d := json.NewDecoder(bytes.NewReader(h.Options))
		d.DisallowUnknownFields()
		if err := d.Decode(&o); err != nil {
			return nil, fmt.Errorf("%w: %w: site %s: plugin.options: %w (known: root, shell, kill_grace, max_input_bytes, max_output_bytes, max_output_files, pass_env)",
				ErrConfig, backends.ErrInvalidSpec, h.Name, err)
		}
	}
	cfg := Config{Name: h.Name, Root: o.Root, Slots: h.Nodes, CoresPerNode: h.CoresPerNode, Shell: o.Shell,
		MaxInputBytes: o.MaxInputBytes, MaxOutputBytes: o.MaxOutputBytes, MaxOutputFiles: o.MaxOutputFiles, PassEnv: o.PassEnv}
	if cfg.Root == "" {
		cfg.Root = h.RemoteDir
	}
	if o.KillGrace != "" {
		d, err := time.ParseDuration(o.KillGrace)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: %w: site %s: plugin.options.kill_grace must be a positive duration such as 10s, got %q",
				ErrConfig, backends.ErrInvalidSpec, h.Name, o.KillGrace)
		}
		cfg.KillGrace = d
	}
	s, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("site %s: %w: %w", h.Name, backends.ErrInvalidSpec, err)
	}
	return s, nil
}
