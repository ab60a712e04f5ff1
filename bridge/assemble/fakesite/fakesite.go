package fakesite

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/simbackend"
)

// ErrDown is what a Flaky site's Info returns while it is down: the text
// an SSH dial to an unreachable host gives.
var ErrDown = errors.New("ssh: dial tcp 10.0.0.5:22: connect: connection refused")

// Flaky is a Backend whose Info fails with Err (ErrDown when nil) while
// Down is set; everything else passes through.
type Flaky struct {
	backends.Backend
	Down *atomic.Bool
	Err  error
}

// Info implements backends.Backend.
func (f Flaky) Info(ctx context.Context) (*backends.SiteInfo, error) {
	if f.Down != nil && f.Down.Load() {
		if f.Err != nil {
			return nil, f.Err
		}
		return nil, ErrDown
	}
	return f.Backend.Info(ctx)
}

// Measured is a Flaky site that has measured its link
// (backends.LinkEstimator).
type Measured struct {
	Flaky
	SecPerByte float64
	Latency    time.Duration
}

// LinkEstimate implements backends.LinkEstimator.
func (m Measured) LinkEstimate() (float64, time.Duration, bool) {
	return m.SecPerByte, m.Latency, true
}

// Site is what Spec builds for one site: a simulated site of Nodes nodes
// of Cores cores and factor H, wrapped by Wrap (nil: as it is), presented
// as a site of kind Kind (a real kind: the daemon treats it as real).
type Site struct {
	Name  string
	Kind  string
	Nodes int
	Cores int
	H     float64
	Wrap  func(backends.Backend) backends.Backend
}

// Spec assembles the sites on one simulated engine started at epoch.
func Spec(epoch time.Time, sites ...Site) assemble.Spec {
	e := simbackend.NewEngine(epoch, 1)
	var spec assemble.Spec
	for _, s := range sites {
		spec.Sites = append(spec.Sites, assemble.SiteSpec{Name: s.Name, Kind: s.Kind, Nodes: s.Nodes, CoresPerNode: s.Cores, H: s.H,
			Open: func(context.Context) (backends.Backend, io.Closer, error) {
				b, err := simbackend.NewSite(e, simbackend.SiteConfig{Name: s.Name, Nodes: s.Nodes, CoresPerNode: s.Cores})
				if err != nil {
					return nil, nil, err
				}
				if s.Wrap != nil {
					return s.Wrap(b), nil, nil
				}
				return b, nil, nil
			}})
	}
	return spec
}
