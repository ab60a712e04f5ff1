package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL cluster.
type Server struct {
	Dir          string // the cluster's directory (data/, the socket, the password file)
	Port         int
	User         string // the superuser
	PasswordFile string // its password, one line, mode 0600
	password     string
	cmd          *exec.Cmd
	exited       chan struct{}
	logFile      string
}

var (
	shared  *Server
	skipMsg string
	dbSeq   atomic.Int64
)

// Main starts the shared server, runs the tests and stops the server. A
// server that cannot start makes DB skip with the reason (missing
// binaries) or fail (anything else).
func Main(m *testing.M) {
	s, err := Start()
	if err != nil {
		skipMsg = err.Error()
	}
	shared = s
	code := m.Run()
	if s != nil {
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	os.Exit(code)
}

// ErrNoPostgres: the PostgreSQL server binaries are not installed.
var ErrNoPostgres = errors.New("PostgreSQL server binaries not found (apt-get install postgresql)")

// binDir finds initdb and postgres: Debian's newest version first, then PATH.
func binDir() (string, error) {
	if d := os.Getenv("GRIDSUB_PG_BIN"); d != "" {
		return d, nil
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(ms, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(ms[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(ms[j]))))
		return vi > vj
	})
	if len(ms) > 0 {
		return filepath.Dir(ms[0]), nil
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNoPostgres
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start initialises and starts a cluster in a new temporary directory.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gridsub-pg-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, PostgreSQL needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	pw := make([]byte, 16)
	rand.Read(pw)
	s := &Server{Dir: dir, User: "gridsub", password: hex.EncodeToString(pw), PasswordFile: filepath.Join(dir, "password"),
		logFile: filepath.Join(dir, "postgres.log"), exited: make(chan struct{})}
	if err := os.WriteFile(s.PasswordFile, []byte(s.password+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		os.Chown(s.PasswordFile, int(cred.Uid), int(cred.Gid))
	}
	run := func(name string, args ...string) *exec.Cmd {
		c := exec.Command(filepath.Join(bin, name), args...)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		c.Dir = dir
		c.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "LANG=C.UTF-8")
		return c
	}
	data := filepath.Join(dir, "data")
	out, err := run("initdb", "-D", data, "-U", s.User, "--pwfile="+s.PasswordFile, "--auth=scram-sha-256",
		"--encoding=UTF8", "--no-instructions").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if s.Port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// Durable as in production (fsync, synchronous_commit on); sized for
	// a few dozen test clients.
	s.cmd = run("postgres", "-D", data, "-p", strconv.Itoa(s.Port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200", "-c", "shared_buffers=128MB", "-c", "fsync=on", "-c", "synchronous_commit=on")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	logf.Close()
	go func() { s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.DSN("postgres")+" password="+s.password)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return s, nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(s.logFile)
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres exited at start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("postgres did not answer within 60s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// DSN is a connection string for database db, without the password.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", s.Port, s.User, db)
}

// Password is the superuser's password (for tests of where it comes from).
func (s *Server) Password() string { return s.password }

// Stop shuts the server down (SIGINT: fast shutdown, then SIGKILL after
// 30 s), by its pid, and removes its directory.
func (s *Server) Stop() error {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	}
	return os.RemoveAll(s.Dir)
}

// Database is one test's database on the shared server.
type Database struct {
	Server *Server
	Name   string
}

// DSN is the database's connection string, without the password.
func (d Database) DSN() string { return d.Server.DSN(d.Name) }

// Shared returns the server Main started, or skips t.
func Shared(t testing.TB) *Server {
	t.Helper()
	if shared == nil {
		if skipMsg == "" {
			skipMsg = "pgtest.Main did not run in this test binary's TestMain"
		}
		if strings.Contains(skipMsg, ErrNoPostgres.Error()) {
			t.Skip("no PostgreSQL: ", skipMsg)
		}
		if os.Getenv("GRIDSUB_REQUIRE_PG") != "" {
			t.Fatal("PostgreSQL did not start: ", skipMsg)
		}
		t.Skip("PostgreSQL did not start: ", skipMsg)
	}
	return shared
}

// DB creates a fresh, empty database for t on the shared server (dropped
// when t ends) or skips t when no server runs.
func DB(t testing.TB) Database {
	t.Helper()
	s := Shared(t)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DSN("postgres")+" password="+s.password)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, s.DSN("postgres")+" password="+s.password)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return Database{Server: s, Name: name}
}

// StartT starts a server of t's own (for a test binary that has no
// TestMain of pgtest's), stopped when t ends; it skips t when the binaries
// are missing.
func StartT(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if errors.Is(err, ErrNoPostgres) {
		t.Skip("no PostgreSQL: ", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

// CreateDB creates an empty database on s and returns its DSN (no
// password; s.PasswordFile has it).
func (s *Server) CreateDB(t testing.TB, name string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DSN("postgres")+" password="+s.password)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return s.DSN(name)
}
