package plugins_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/simbackend/sshsite"
)

// TestSupervisorHungCalls: a plugin whose Submit or Status never returns —
// the isolated SLURM backend over an SSH-served site whose sbatch, then
// squeue, hangs, while the plugin still answers its pings — fails the call
// at its deadline (a submission's outcome unknown, to be looked up by its
// tag), is unhealthy whatever its pings say, fails the broker's routine
// calls at once meanwhile, and is healthy again once a call answers.
func TestSupervisorHungCalls(t *testing.T) {
	dir := t.TempDir()
	key, err := sshsite.NewClientKey(filepath.Join(dir, "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	site, err := sshsite.Start(context.Background(), sshsite.Config{Name: "hungsite", Dialect: sshsite.SLURM, Nodes: 2, Cores: 1,
		Dir: filepath.Join(dir, "site"), AuthorizedKeys: []ssh.PublicKey{key.Public}, Exe: gridsub(t), ExeArgs: []string{"simsite", "cmd"}})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	kh := filepath.Join(dir, "known_hosts")
	if err := site.WriteKnownHosts(kh); err != nil {
		t.Fatal(err)
	}
	tc := site.Transport(key.File, kh)
	spec := plugins.BackendSpec{Config: plugins.BackendConfig{Name: "hung", Kind: "slurm", RemoteDir: filepath.Join(dir, "site", "home", "jobs"),
		SSH: &plugins.SSHConfig{Host: tc.Host, Port: tc.Port, User: tc.User, KeyFiles: tc.KeyFiles, KnownHosts: tc.KnownHosts},
		// The backend itself would wait an hour: only the supervisor's
		// deadline bounds the call.
		Budget: &plugins.BudgetConfig{CommandTimeout: time.Hour}},
		Builtin: "slurm", Isolate: true, Self: gridsub(t), StartTimeout: 20 * time.Second}
	ev := &events{}
	opts := fastOpts(ev)
	opts.PingTimeout = 5 * time.Second
	opts.CallTimeout, opts.UnhealthyRetry = 2*time.Second, 3*time.Second
	s, err := plugins.Supervise(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	job := &backends.JobSpec{GridID: "hang-1", Nodes: 1, Walltime: time.Minute, Command: []string{"true"}}

	site.Hang("sbatch", true)
	t0 := time.Now()
	_, err = s.Submit(ctx, job)
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("a hung Submit took %s, the deadline is 2s", took)
	}
	if !errors.Is(err, backends.ErrUnavailable) || !backends.OutcomeUnknown(err) {
		t.Fatalf("a hung Submit: %v, want ErrUnavailable and ErrOutcomeUnknown (look the tag up before retrying)", err)
	}
	if h := s.Health(); h.State != "unhealthy" {
		t.Errorf("health after a call overran: %+v, want unhealthy", h)
	}
	if !ev.has("plugin-unhealthy") {
		t.Errorf("events %v lack plugin-unhealthy", ev.list)
	}
	// The broker's routine calls fail at once while it is unhealthy.
	t0 = time.Now()
	if _, err := s.Status(backends.Routine(ctx), []backends.JobID{"1"}); !errors.Is(err, backends.ErrUnavailable) || time.Since(t0) > time.Second {
		t.Errorf("a routine call to an unhealthy plugin: %v after %s, want ErrUnavailable at once", err, time.Since(t0))
	}
	site.Hang("sbatch", false)

	site.Hang("squeue", true)
	time.Sleep(opts.UnhealthyRetry)
	t0 = time.Now()
	if _, err := s.Status(ctx, []backends.JobID{"1"}); !errors.Is(err, backends.ErrUnavailable) || time.Since(t0) > 10*time.Second {
		t.Fatalf("a hung Status: %v after %s, want ErrUnavailable at its deadline", err, time.Since(t0))
	}
	if h := s.Health(); h.State != "unhealthy" {
		t.Errorf("health after Status overran: %+v", h)
	}
	site.Hang("squeue", false)
	waitFor(t, "a call answering again", 20*time.Second, func() bool {
		_, err := s.Status(ctx, []backends.JobID{"1"})
		return err == nil
	})
	if h := s.Health(); h.State != "ok" || h.Restarts != 0 {
		t.Errorf("health after a call answered: %+v, want ok, never restarted (its pings answered throughout)", h)
	}
	// The submission cut short is found by its tag (it may have reached
	// the site when sbatch was let go).
	if _, err := s.FindByGridID(ctx, job.GridID); err != nil {
		t.Errorf("looking the cut submission up: %v", err)
	}
}
