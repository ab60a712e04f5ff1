package sshsite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/backendtest"
	"golang.org/x/crypto/ssh"
)

// TestMain makes the test binary the sites' batch commands: the bin/
// stubs run `<test binary> simsite-cmd <socket> <command> ...`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "simsite-cmd" {
		os.Exit(CmdMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

type testSite struct {
	*Site
	key, known string
}

// startSite serves a site of the dialect in a temporary directory and
// writes a client key and known_hosts for it.
func startSite(t testing.TB, dialect string, nodes, cores int, scale float64) *testSite {
	t.Helper()
	return startSiteCfg(t, Config{Dialect: dialect, Nodes: nodes, Cores: cores, Scale: scale})
}

func startSiteCfg(t testing.TB, cfg Config) *testSite {
	t.Helper()
	dir, err := os.MkdirTemp("", "simsite")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	key, err := NewClientKey(filepath.Join(dir, "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name = "sim" + cfg.Dialect
	cfg.Dir, cfg.AuthorizedKeys, cfg.Exe, cfg.ExeArgs = filepath.Join(dir, "site"), []ssh.PublicKey{key.Public}, exe, []string{"simsite-cmd"}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	kh := filepath.Join(dir, "known_hosts")
	if err := s.WriteKnownHosts(kh); err != nil {
		t.Fatal(err)
	}
	return &testSite{Site: s, key: key.File, known: kh}
}

var seq atomic.Int64

func gridID(p string) string {
	return fmt.Sprintf("%s-%d-%d", p, time.Now().UnixNano()%1e9, seq.Add(1))
}

func conformance(t *testing.T, dialect string) {
	const scale = 20
	s := startSite(t, dialect, 4, 2, scale)
	b, closeB, err := s.Backend(context.Background(), s.key, s.known, "gridsub-test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeB()
	unknown := backends.JobID("999999")
	if dialect == PBS {
		unknown = backends.JobID("999999." + s.cfg.Name)
	}
	backendtest.Run(t, backendtest.Harness{
		Backend: b,
		GridID:  func() string { return gridID("ct") },
		Wait: func(ctx context.Context, d time.Duration) {
			time.Sleep(time.Duration(float64(d) / scale))
		},
		Now:           s.Now,
		Poll:          2 * time.Second, // 100 ms of wall time
		ShortRun:      3 * time.Second, // real seconds: a loaded machine may take over 1 s between Submit and Status
		JobTimeout:    2 * time.Minute,
		Parallel:      true,
		Walltime:      true,
		TimeoutWall:   time.Minute,
		Staging:       true,
		Reservations:  true,
		NamesReported: dialect == SLURM,
		UnknownID:     unknown,
		RemoteExists: func(ctx context.Context, p string) (bool, error) {
			_, err := os.Lstat(p)
			return err == nil, nil
		},
	})
}

func TestConformanceSLURMDialect(t *testing.T) { t.Parallel(); conformance(t, SLURM) }

func TestConformancePBSDialect(t *testing.T) { t.Parallel(); conformance(t, PBS) }
