package plugins_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// TestSubmitBatchCutShortIsAdopted: the plugin dies during a batch, after
// the site accepted its first job and before the second. The supervisor
// asks the restarted plugin for each job's tag: the first is adopted (no
// second submission), the second keeps an unknown outcome (retryable, to be
// looked up again before it is resubmitted).
func TestSubmitBatchCutShortIsAdopted(t *testing.T) {
	bin := build(t, "./bridge/plugins/testdata/diskplugin")
	jobs := t.TempDir()
	ev := &events{}
	s, err := plugins.Supervise(context.Background(), plugins.BackendSpec{Config: plugins.BackendConfig{Name: "disk"},
		Path: bin, SHA256: sum(t, bin), Env: []string{"GRIDSUB_DISKPLUGIN_DIR=" + jobs, "GRIDSUB_DISKPLUGIN_SUBMIT_DELAY=3s"}}, fastOpts(ev))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	specs := []*backends.JobSpec{
		{GridID: "g-b1", Nodes: 1, Command: []string{"true"}, Walltime: time.Minute},
		{GridID: "g-b2", Nodes: 1, Command: []string{"true"}, Walltime: time.Minute},
	}
	pid := pidOf(s)
	go func() {
		for {
			if es, _ := os.ReadDir(jobs); len(es) > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := s.SubmitBatch(ctx, specs)
	es, _ := os.ReadDir(jobs)
	if len(es) != 1 {
		t.Fatalf("jobs at the site: %v, want the first only", es)
	}
	if res[0].Err != nil || string(res[0].ID) != es[0].Name() {
		t.Errorf("job 1: %+v, want adopted as %s", res[0], es[0].Name())
	}
	if !backends.OutcomeUnknown(res[1].Err) || !backends.Retryable(res[1].Err) {
		t.Errorf("job 2: %v, want unknown outcome, retryable", res[1].Err)
	}
	if !ev.has("plugin-adopted") {
		t.Errorf("events %v lack plugin-adopted", ev.list)
	}
}
