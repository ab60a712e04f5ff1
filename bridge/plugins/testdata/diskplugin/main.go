// Command diskplugin is a test backend plugin whose jobs live in a
// directory (GRIDSUB_DISKPLUGIN_DIR, given by the host), so they outlive the plugin process
// like a batch system's jobs do. Submit records the job, then waits
// GRIDSUB_DISKPLUGIN_SUBMIT_DELAY before it answers: a test kills the
// plugin in that window to play a crash after the site accepted a job but
// before the host heard of it. A job completes once its file is older than
// one second.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
)

type disk struct{ dir string }

func (d disk) Name() string { return "disk" }

func (d disk) Info(context.Context) (*backends.SiteInfo, error) {
	// The second partition tells the test which of the host's variables
	// the plugin sees.
	return &backends.SiteInfo{Name: "disk", Kind: "disk", Nodes: 4, FreeNodes: 4, CoresPerNode: 1,
		Partitions: []string{"p", "token=" + os.Getenv("GRIDSUB_TOKEN") + ",home=" + os.Getenv("HOME")}}, nil
}

func (d disk) Submit(ctx context.Context, s *backends.JobSpec) (backends.JobID, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	id := fmt.Sprintf("%d", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(d.dir, id), []byte(s.GridID), 0o644); err != nil {
		return "", err
	}
	if dl, err := time.ParseDuration(os.Getenv("GRIDSUB_DISKPLUGIN_SUBMIT_DELAY")); err == nil {
		select {
		case <-time.After(dl):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return backends.JobID(id), nil
}

func (d disk) status(id string) backends.JobStatus {
	p := filepath.Join(d.dir, id)
	b, err := os.ReadFile(p)
	fi, serr := os.Stat(p)
	if err != nil || serr != nil || strings.Contains(id, "/") {
		return backends.JobStatus{ID: backends.JobID(id), State: backends.StateLost, ExitCode: -1}
	}
	st := backends.JobStatus{ID: backends.JobID(id), GridID: string(b), State: backends.StateRunning, ExitCode: -1}
	if time.Since(fi.ModTime()) > time.Second {
		st.State, st.ExitCode = backends.StateCompleted, 0
	}
	return st
}

func (d disk) Status(_ context.Context, ids []backends.JobID) ([]backends.JobStatus, error) {
	out := make([]backends.JobStatus, len(ids))
	for i, id := range ids {
		out[i] = d.status(string(id))
	}
	return out, nil
}

func (d disk) Cancel(context.Context, backends.JobID) error { return nil }

func (d disk) FindByGridID(_ context.Context, g string) ([]backends.JobStatus, error) {
	es, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var out []backends.JobStatus
	for _, e := range es {
		if st := d.status(e.Name()); st.GridID == g {
			out = append(out, st)
		}
	}
	return out, nil
}

func main() {
	plugins.ServeBackend(disk{dir: os.Getenv("GRIDSUB_DISKPLUGIN_DIR")})
}
