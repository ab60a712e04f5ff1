package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

const secret = "SECRET OUTSIDE THE JOB DIRECTORY"

// hostileJobDir makes, under a fresh root, the job directory a hostile job
// leaves behind, and a directory outside it holding a secret:
//
//	outside/secret.txt            "SECRET OUTSIDE THE JOB DIRECTORY"
//	root/job/ok.txt               a regular file
//	root/job/leak -> outside/secret.txt
//	root/job/zero -> /dev/zero
//	root/job/fifo                 a FIFO nobody writes to
//	root/job/sock                 a unix socket
//	root/job/sub  -> outside      a symlinked directory
func hostileJobDir(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	job := filepath.Join(root, "job")
	for _, d := range []string{job, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644))
	must(os.WriteFile(filepath.Join(job, "ok.txt"), []byte("fine\n"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(job, "leak")))
	must(os.Symlink("/dev/zero", filepath.Join(job, "zero")))
	must(syscall.Mkfifo(filepath.Join(job, "fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(job, "sock"))
	must(err)
	t.Cleanup(func() { l.Close() })
	must(os.Symlink(outside, filepath.Join(job, "sub")))
	return root, outside
}

// TestPrivateSSHDFetchConfined fetches from a hostile job directory through
// a real OpenSSH sshd: a symlink to a file outside, a symlink to /dev/zero,
// a FIFO, a socket and a path through a symlinked directory are refused
// quickly with ErrSpecialFile naming the path and its type, and not one
// byte of them arrives; the regular file next to them still comes back.
func TestPrivateSSHDFetchConfined(t *testing.T) {
	cfg, _ := startPrivateSSHD(t)
	ctx := ctxTimeout(t, 60*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root, _ := hostileJobDir(t)
	st := c.Stager(root)
	for _, tc := range []struct{ path, kind string }{
		{"job/leak", "symbolic link"},
		{"job/zero", "symbolic link"},
		{"job/fifo", "named pipe (FIFO)"},
		{"job/sock", "socket"},
		{"job/sub/secret.txt", "symbolic link, not a directory"},
		{"job", "directory"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			var dst bytes.Buffer
			t0 := time.Now()
			_, err := st.Get(ctx, tc.path, &dst)
			took := time.Since(t0)
			if !errors.Is(err, ErrSpecialFile) || !errors.Is(err, backends.ErrInvalidSpec) {
				t.Fatalf("Get %s: %v, want ErrSpecialFile", tc.path, err)
			}
			if !strings.Contains(err.Error(), tc.kind) || !strings.Contains(err.Error(), filepath.Join(root, filepath.Dir(tc.path))) {
				t.Errorf("error does not name the path and its type (%s): %v", tc.kind, err)
			}
			if dst.Len() != 0 {
				t.Errorf("%d bytes arrived: %q", dst.Len(), dst.Bytes()[:min(dst.Len(), 64)])
			}
			if took > 5*time.Second {
				t.Errorf("refusal took %s", took)
			}
		})
	}
	var dst bytes.Buffer
	if _, err := st.Get(ctx, "job/ok.txt", &dst); err != nil || dst.String() != "fine\n" {
		t.Fatalf("regular file next to them: %q %v", dst.String(), err)
	}
	// A missing file is still "not found" (optional outputs rely on it).
	if _, err := st.Get(ctx, "job/missing", io.Discard); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

// TestPrivateSSHDStageInConfined puts files through a real sshd into a job
// directory with a symlinked subdirectory and a symlink planted at the
// final name: both are refused with ErrSpecialFile and nothing is written
// outside the root (no file, no temp file, no directory).
func TestPrivateSSHDStageInConfined(t *testing.T) {
	cfg, _ := startPrivateSSHD(t)
	ctx := ctxTimeout(t, 60*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root, outside := hostileJobDir(t)
	target := filepath.Join(outside, "target.txt")
	if err := os.WriteFile(target, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "job", "planted")); err != nil {
		t.Fatal(err)
	}
	st := c.Stager(root)
	for _, p := range []string{"job/sub/input.dat", "job/sub/deeper/input.dat", "job/planted", "job/leak", "job/fifo"} {
		_, err := st.Put(ctx, strings.NewReader("payload"), p, 0)
		if !errors.Is(err, ErrSpecialFile) {
			t.Errorf("Put %s: %v, want ErrSpecialFile", p, err)
		}
	}
	ents, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "secret.txt,target.txt" {
		t.Errorf("outside the root now holds %v, want only secret.txt,target.txt", names)
	}
	if b, _ := os.ReadFile(target); string(b) != "untouched" {
		t.Errorf("the planted link's target was written: %q", b)
	}
	// A fresh directory tree is still created and written.
	if _, err := st.Put(ctx, strings.NewReader("payload"), "job/new/dir/input.dat", 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "job", "new", "dir", "input.dat")); string(b) != "payload" {
		t.Errorf("staged file holds %q", b)
	}
}

// endless is an endless source of zeros of unknown size (like /dev/zero).
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// TestPrivateSSHDSizeLimits: with MaxFileSize 1 MiB, a 2 MiB remote file
// is refused before a byte moves, an endless upload stops at the limit
// with an error naming the file and the limit (no final file, no temp
// file), and a job budget given to GetLimit is enforced the same way.
func TestPrivateSSHDSizeLimits(t *testing.T) {
	cfg, _ := startPrivateSSHD(t)
	cfg.MaxFileSize = 1 << 20
	ctx := ctxTimeout(t, 60*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "big.bin"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "small.bin"), make([]byte, 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	st := c.Stager(root)
	var dst bytes.Buffer
	_, err = st.Get(ctx, "big.bin", &dst)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "big.bin") || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("Get over the limit: %v, want ErrTooLarge naming the file and the limit", err)
	}
	if dst.Len() != 0 {
		t.Errorf("%d bytes arrived", dst.Len())
	}
	if _, err := st.GetLimit(ctx, "small.bin", &dst, 100<<10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("GetLimit over the job budget: %v, want ErrTooLarge", err)
	}
	if _, err := st.GetLimit(ctx, "small.bin", &dst, 0); err != nil || dst.Len() != 300<<10 {
		t.Errorf("GetLimit within the limit: %d bytes, %v", dst.Len(), err)
	}

	src := &endless{}
	t0 := time.Now()
	_, err = st.Put(ctx, src, "out/zero.bin", 0)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "out/zero.bin") || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("endless Put: %v, want ErrTooLarge naming the file and the limit", err)
	}
	if n := src.n.Load(); n > 2<<20 {
		t.Errorf("read %d bytes of the endless source, want to stop near the 1 MiB limit", n)
	}
	t.Logf("endless upload stopped after %s: %v", time.Since(t0), err)
	if _, err := os.Stat(filepath.Join(root, "out", "zero.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("final name exists: %v", err)
	}
	if left := tempFiles(t, root); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
	// A source that says its size is refused before the upload starts.
	if _, err := st.Put(ctx, bytes.NewReader(make([]byte, 2<<20)), "out/sized.bin", 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Put of a 2 MiB reader: %v, want ErrTooLarge", err)
	}
}

// stallProxy forwards TCP connections to target until *stall is set; from
// then on it stops forwarding in both directions (a hung network path or
// server), without closing anything, until the test ends.
func stallProxy(t *testing.T, target string, stall *atomic.Bool) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	pipe := func(dst, src net.Conn) {
		defer dst.Close()
		buf := make([]byte, 16<<10)
		for {
			n, err := src.Read(buf)
			if stall.Load() {
				<-done
				return
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestPrivateSSHDStalledTransferDeadline: a download from a real sshd whose
// network path hangs mid-transfer is cancelled at its deadline
// (MinTransferTime + size/MinTransferRate) with ErrTransferTimeout, which
// also matches context.DeadlineExceeded, although the caller's context
// has no deadline.
func TestPrivateSSHDStalledTransferDeadline(t *testing.T) {
	cfg, _ := startPrivateSSHD(t)
	var stall atomic.Bool
	port := stallProxy(t, fmt.Sprintf("127.0.0.1:%d", cfg.Port), &stall)
	hostLine, err := os.ReadFile(cfg.KnownHosts[0])
	if err != nil {
		t.Fatal(err)
	}
	cfg.KnownHosts = []string{writeKnownHosts(t, strings.Replace(strings.TrimSpace(string(hostLine)),
		fmt.Sprintf(":%d", cfg.Port), fmt.Sprintf(":%d", port), 1))}
	cfg.Port = port
	cfg.MinTransferTime = time.Second
	cfg.MinTransferRate = 4 << 20 // 8 MiB: a 2 s budget on top
	cfg.SFTPSequential = true     // one request at a time: the stall hits mid-file
	cfg.KeepAlive = -1
	ctx := context.Background()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "data.bin"), randomBytes(8<<20, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	st := c.Stager(root)
	w := &stallAfter{after: 1 << 20, stall: &stall}
	t0 := time.Now()
	_, err = st.Get(ctx, "data.bin", w)
	took := time.Since(t0)
	if !errors.Is(err, ErrTransferTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled Get after %s: %v, want ErrTransferTimeout", took, err)
	}
	if !stall.Load() {
		t.Fatal("the transfer never reached the stall point")
	}
	// Deadline 1 s + 8 MiB / 4 MiB/s = 3 s, plus abortGrace for the session.
	if took < 2500*time.Millisecond || took > 3*time.Second+2*abortGrace+5*time.Second {
		t.Errorf("cancelled after %s, want about 3 s (+ up to twice %s grace)", took, abortGrace)
	}
	t.Logf("stalled download cancelled after %s: %v", took, err)
}

// stallAfter is a destination that sets stall once after bytes arrived.
type stallAfter struct {
	n, after int64
	stall    *atomic.Bool
}

func (s *stallAfter) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	if s.n >= s.after {
		s.stall.Store(true)
	}
	return len(p), nil
}

// TestPrivateSSHDRunOutputBounded: a command that writes without end (here
// `head -c 4MiB /dev/zero` against a 1 MiB MaxOutput, through a real sshd)
// gets ErrOutputLimit (also backends.ErrBadOutput) with the first MiB
// kept, and the connection stays usable.
func TestPrivateSSHDRunOutputBounded(t *testing.T) {
	cfg, _ := startPrivateSSHD(t)
	cfg.MaxOutput = 1 << 20
	ctx := ctxTimeout(t, 60*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Run(ctx, []string{"head", "-c", "4194304", "/dev/zero"}, nil)
	if !errors.Is(err, ErrOutputLimit) || !errors.Is(err, backends.ErrBadOutput) || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("4 MiB of output: %v, want ErrOutputLimit naming the limit", err)
	}
	if len(res.Stdout) != 1<<20 {
		t.Errorf("kept %d bytes, want the first 1 MiB", len(res.Stdout))
	}
	if res, err := c.Run(ctx, []string{"echo", "still here"}, nil); err != nil || string(res.Stdout) != "still here\n" {
		t.Errorf("after the overflow: %q %v", res.Stdout, err)
	}
}
