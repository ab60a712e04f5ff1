package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/internal/config"
)

// TestCLIUsersSeeOnlyTheirOwnJobs: alice submits a job with her token;
// every CLI command that names a job, run as bob (his token over TCP,
// and, as root, as another uid on the shared socket), fails with "no
// job", and the listing commands do not show it. Alice's own commands
// work on it.
func TestCLIUsersSeeOnlyTheirOwnJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildBinary(t)
	top, err := os.MkdirTemp("", "gscu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	// The binary, for another uid to run.
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(top, "gridsub")
	if err := os.WriteFile(pub, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(top, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	state, sock := filepath.Join(top, "state"), filepath.Join(top, "run", "gridsub.sock")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	service := strings.Repeat("s", 40)
	serveForUsers(t, pub, sock, 30*time.Second, []string{"serve", "--listen", addr, "--time-scale", "1"},
		envStateDir+"="+state, envSocket+"="+sock, "GRIDSUB_CONFIG="+os.Getenv("GRIDSUB_CONFIG"), envToken+"="+service,
		config.EnvName("broker.shared_socket")+"=true", config.EnvName("broker.output_root")+"="+top)

	// The administrator (this process, on the socket) makes the tokens
	// with the CLI.
	t.Setenv(envSocket, sock)
	t.Setenv(envURL, "")
	code, aliceTok, stderr := cli("token", "create", "--user", "alice")
	aliceTok = strings.TrimSpace(aliceTok)
	if code != 0 || !strings.HasPrefix(aliceTok, "gst_") || !strings.Contains(stderr, "shown this once") {
		t.Fatalf("token create: exit %d %q %q", code, aliceTok, stderr)
	}
	code, bobTok, _ := cli("token", "create", "--user", "bob")
	bobTok = strings.TrimSpace(bobTok)
	if code != 0 {
		t.Fatalf("token create bob: exit %d", code)
	}
	code, out, _ := cli("token", "list")
	if code != 0 || !strings.Contains(out, "alice") || strings.Contains(out, aliceTok) {
		t.Fatalf("token list: exit %d %q", code, out)
	}

	job := filepath.Join(top, "long.yaml")
	os.WriteFile(job, []byte("name: alices-secret-job\ncommand: [\"/bin/true\"]\nresources:\n  nodes: 1\n  walltime: 20h\nsimulate:\n  runtime: 10h\n"), 0o644)
	as := func(tok string) {
		t.Setenv(envURL, "http://"+addr)
		t.Setenv(envToken, tok)
	}
	as(aliceTok)
	code, out, stderr = cli("submit", job)
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("alice submits: exit %d %q %q", code, out, stderr)
	}
	short := id[len(id)-6:]
	byID := [][]string{{"status", id}, {"status", short}, {"events", id}, {"watch", id}, {"logs", id}, {"output", id},
		{"explain", id}, {"cancel", id}, {"hold", id}, {"release", id}, {"requeue", id}, {"scancel", strings.TrimLeft(short, "0")},
		{"scontrol", "show", "job", strings.TrimLeft(short, "0")}}
	listing := [][]string{{"list"}, {"history"}, {"status"}, {"squeue"}, {"qstat"}}
	secret := []string{id, "alices-secret-job"}
	checkAs := func(who string, run func(args ...string) (int, string, string)) {
		for _, args := range byID {
			code, out, errs := run(args...)
			if code == 0 || !strings.Contains(out+errs, "no job") && !strings.Contains(out+errs, "not found") &&
				!strings.Contains(out+errs, "Invalid job id") {
				t.Errorf("%s: gridsub %s: exit %d, want a failure saying there is no such job\nstdout %q\nstderr %q", who, strings.Join(args, " "), code, out, errs)
			}
		}
		for _, args := range listing {
			code, out, errs := run(args...)
			for _, s := range secret {
				if strings.Contains(out+errs, s) {
					t.Errorf("%s: gridsub %s (exit %d) shows %q:\n%s%s", who, strings.Join(args, " "), code, s, out, errs)
				}
			}
		}
		if code, out, errs := run("token", "list"); code == 0 || !strings.Contains(errs, "administrators only") {
			t.Errorf("%s: token list: exit %d %q %q", who, code, out, errs)
		}
	}
	// A command that finds the job would not end (watch follows a 10 h
	// job): each runs as a process of its own, bounded.
	runAs := func(env []string, cred *syscall.Credential) func(args ...string) (int, string, string) {
		return func(args ...string) (int, string, string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := exec.CommandContext(ctx, pub, args...)
			c.Dir = top
			c.Env = append([]string{"HOME=" + top, "PATH=/usr/bin:/bin", "GRIDSUB_CONFIG=" + os.Getenv("GRIDSUB_CONFIG"),
				envStateDir + "=" + filepath.Join(top, "nostate")}, env...)
			if cred != nil {
				c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			}
			var o, e strings.Builder
			c.Stdout, c.Stderr = &o, &e
			err := c.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
				e.WriteString(err.Error())
			}
			if ctx.Err() != nil {
				e.WriteString(" (still running after a minute: killed)")
			}
			return code, o.String(), e.String()
		}
	}
	checkAs("bob (token)", runAs([]string{envURL + "=http://" + addr, envToken + "=" + bobTok, envSocket + "=" + filepath.Join(top, "none.sock")}, nil))

	if _, err := exec.LookPath("useradd"); os.Getuid() != 0 || err != nil {
		t.Log("not root, or no useradd: the CLI as another uid on the socket is skipped (it needs a second uid); the token half ran")
	} else {
		name := fmt.Sprintf("gscli%d", os.Getpid()%100000)
		if out, err := exec.Command("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("userdel", name).Run() })
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		asUID := runAs([]string{envSocket + "=" + sock}, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)})
		if code, out, errs := asUID("whoami"); code != 0 || !strings.HasPrefix(out, name+" (user, known by socket)") {
			t.Fatalf("whoami as %s: exit %d %q %q", name, code, out, errs)
		}
		checkAs(name+" (socket)", asUID)
	}

	// Alice sees and cancels her job.
	as(aliceTok)
	if code, out, errs := cli("status", short); code != 0 || !strings.Contains(out, id) {
		t.Errorf("alice: status: exit %d %q %q", code, out, errs)
	}
	if code, out, errs := cli("cancel", id); code != 0 {
		t.Errorf("alice: cancel: exit %d %q %q", code, out, errs)
	}
}

// serveForUsers starts bin with args (a `gridsub serve`) and env (and no
// other GRIDSUB_ variable), waits up to wait for its socket sock to
// answer, and stops it with SIGTERM at the end of the test. It returns
// the daemon's log.
func serveForUsers(t *testing.T, bin, sock string, wait time.Duration, args []string, env ...string) *logBuffer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "GRIDSUB_") }), env...)
	logs := &logBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	root := api.NewUnixClient(sock)
	for deadline := time.Now().Add(wait); ; {
		if _, err := root.Health(context.Background()); err == nil {
			return logs
		}
		select {
		case err := <-done:
			t.Fatalf("gridsub serve exited: %v\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon after %s:\n%s", wait, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
