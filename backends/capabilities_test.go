package backends_test

import (
	"context"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

type plain struct{}

func (plain) Name() string                                                      { return "plain" }
func (plain) Info(context.Context) (*backends.SiteInfo, error)                  { return nil, nil }
func (plain) Submit(context.Context, *backends.JobSpec) (backends.JobID, error) { return "", nil }
func (plain) Status(context.Context, []backends.JobID) ([]backends.JobStatus, error) {
	return nil, nil
}
func (plain) Cancel(context.Context, backends.JobID) error { return nil }

type finder struct{ plain }

func (finder) FindByGridID(context.Context, string) ([]backends.JobStatus, error) { return nil, nil }

// declared implements every interface's Find and claims Find and Fetch.
type declared struct {
	finder
	caps backends.Capabilities
}

func (d declared) Capabilities() backends.Capabilities { return d.caps }

func TestCapabilitiesOf(t *testing.T) {
	if c := backends.CapabilitiesOf(plain{}); c != (backends.Capabilities{}) {
		t.Errorf("plain backend: %+v, want none", c)
	}
	if c := backends.CapabilitiesOf(finder{}); c != (backends.Capabilities{Find: true}) {
		t.Errorf("finder: %+v, want Find only", c)
	}
	// A declaration hides what is implemented but not declared, and cannot
	// grant what is not implemented (Fetch).
	if _, ok := backends.AsFinder(declared{}); ok {
		t.Error("undeclared Find reported as a capability")
	}
	d := declared{caps: backends.Capabilities{Find: true, Fetch: true}}
	if c := backends.CapabilitiesOf(d); c != (backends.Capabilities{Find: true}) {
		t.Errorf("declared: %+v, want Find only", c)
	}
	if _, ok := backends.AsFinder(d); !ok {
		t.Error("declared and implemented Find not reported")
	}
	if _, ok := backends.AsFetcher(d); ok {
		t.Error("declared but unimplemented Fetch reported")
	}
}
