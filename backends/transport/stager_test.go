package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tempFiles lists leftover upload temp files under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".gridsub-tmp-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestPutGetRoundTrip(t *testing.T) {
	for _, sequential := range []bool{false, true} {
		name := "concurrent"
		if sequential {
			name = "sequential"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.cfg.SFTPSequential = sequential
			c := f.dial(t)
			root := filepath.Join(f.srv.Dir, "jobs")
			st := c.Stager(root)
			ctx := ctxTimeout(t, 30*time.Second)
			for i, size := range []int{0, 1, 32 << 10, 3<<20 + 17} {
				data := randomBytes(size, uint64(i))
				remote := "job-1/in/deep/file.bin"
				tr, err := st.Put(ctx, bytes.NewReader(data), remote, 0o640)
				if err != nil {
					t.Fatalf("Put %d bytes: %v", size, err)
				}
				if tr.Bytes != int64(size) || tr.SHA256 != sha(data) || tr.Duration <= 0 {
					t.Errorf("Put transfer %+v, want %d bytes sha %s", tr, size, sha(data))
				}
				onDisk, err := os.ReadFile(filepath.Join(root, remote))
				if err != nil || !bytes.Equal(onDisk, data) {
					t.Fatalf("remote file differs (%d vs %d bytes): %v", len(onDisk), size, err)
				}
				if fi, _ := os.Stat(filepath.Join(root, remote)); fi.Mode().Perm() != 0o640 {
					t.Errorf("mode %v, want 0640", fi.Mode().Perm())
				}
				var got bytes.Buffer
				tr, err = st.Get(ctx, remote, &got)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if !bytes.Equal(got.Bytes(), data) || tr.Bytes != int64(size) || tr.SHA256 != sha(data) {
					t.Errorf("Get returned %d bytes (transfer %+v), want %d", got.Len(), tr, size)
				}
			}
			if left := tempFiles(t, root); len(left) > 0 {
				t.Errorf("temp files left: %v", left)
			}
			if n := c.Estimator().Count(); n != 8 {
				t.Errorf("estimator saw %d transfers, want 8", n)
			}
			long := strings.Repeat("n", 250) // temp name must stay within NAME_MAX
			if _, err := st.Put(ctx, strings.NewReader("long"), long, 0); err != nil {
				t.Errorf("Put with a 250-byte name: %v", err)
			}
			if _, err := st.Put(ctx, strings.NewReader("default mode"), "m", 0); err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(filepath.Join(root, "m")); fi.Mode().Perm() != 0o644 {
				t.Errorf("mode 0 gave %v, want 0644", fi.Mode().Perm())
			}
		})
	}
}

func TestGetMissingFile(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	_, err := c.Stager(f.srv.Dir).Get(ctxTimeout(t, 10*time.Second), "nope", &bytes.Buffer{})
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("got %v, want ErrNotExist and not ErrUnavailable", err)
	}
}

func TestStagerPathConfinement(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	st := c.Stager(f.srv.Dir + "/root")
	ctx := ctxTimeout(t, 10*time.Second)
	for _, p := range []string{"../x", "/etc/passwd", "a/../../b", "..", "./../x", "a/b/../../../c"} {
		_, err := st.Put(ctx, strings.NewReader("x"), p, 0)
		if !errors.Is(err, ErrPathEscape) || !errors.Is(err, backends.ErrInvalidSpec) {
			t.Errorf("Put %q: %v, want ErrPathEscape and ErrInvalidSpec", p, err)
		}
		if _, err := st.Get(ctx, p, &bytes.Buffer{}); !errors.Is(err, ErrPathEscape) {
			t.Errorf("Get %q: %v, want ErrPathEscape", p, err)
		}
	}
	for _, p := range []string{"", ".", "a/..", "x\x00y"} {
		if _, err := st.Put(ctx, strings.NewReader("x"), p, 0); !errors.Is(err, backends.ErrInvalidSpec) {
			t.Errorf("Put %q: %v, want ErrInvalidSpec", p, err)
		}
	}
	// Paths that stay inside are cleaned, not refused.
	if _, err := st.Put(ctx, strings.NewReader("ok"), "a/./b/../c.txt", 0); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.srv.Dir, "root", "a", "c.txt")); err != nil || string(b) != "ok" {
		t.Errorf("a/./b/../c.txt did not land in root/a/c.txt: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(f.srv.Dir, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a file appeared outside the root")
	}
}

func TestPutAtomicOverwrite(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	st := c.Stager(f.srv.Dir)
	ctx := ctxTimeout(t, 10*time.Second)
	if _, err := st.Put(ctx, strings.NewReader("old"), "f", 0); err != nil {
		t.Fatal(err)
	}
	// A source that fails halfway: the old content must survive intact.
	_, err := st.Put(ctx, &failingReader{data: randomBytes(1<<20, 1), failAt: 300 << 10}, "f", 0)
	if err == nil || !strings.Contains(err.Error(), "local disk on fire") {
		t.Fatalf("Put from a failing reader: %v", err)
	}
	if errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("a local read error blamed on the site: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.srv.Dir, "f")); string(b) != "old" {
		t.Errorf("final name holds %d bytes after a failed Put, want the old 3", len(b))
	}
	if left := tempFiles(t, f.srv.Dir); len(left) > 0 {
		t.Errorf("temp files left after a failed Put: %v", left)
	}
	if _, err := st.Put(ctx, strings.NewReader("new"), "f", 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.srv.Dir, "f")); string(b) != "new" {
		t.Errorf("overwrite gave %q", b)
	}
}

type failingReader struct {
	data   []byte
	off    int
	failAt int
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.off >= r.failAt {
		return 0, errors.New("local disk on fire")
	}
	n := copy(p, r.data[r.off:min(len(r.data), r.failAt)])
	r.off += n
	return n, nil
}

func TestPutConnectionDropsMidTransfer(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	st := c.Stager(f.srv.Dir)
	ctx := ctxTimeout(t, 30*time.Second)
	data := randomBytes(8<<20, 7)
	f.srv.DropAfter.Store(1 << 20)
	_, err := st.Put(ctx, bytes.NewReader(data), "out/big.bin", 0)
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Put over a dropped connection: %v, want ErrUnavailable", err)
	}
	final := filepath.Join(f.srv.Dir, "out", "big.bin")
	if _, err := os.Stat(final); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a partial file exists under the final name: %v", err)
	}
	// The connection was gone, so the temp file could not be removed yet.
	if left := tempFiles(t, f.srv.Dir); len(left) != 1 {
		t.Errorf("want exactly the one orphaned temp file before the retry, have %v", left)
	}
	// The retry reconnects transparently, succeeds and removes the
	// temp file the failed attempt could not remove.
	tr, err := st.Put(ctx, bytes.NewReader(data), "out/big.bin", 0)
	if err != nil {
		t.Fatalf("retry Put: %v", err)
	}
	if tr.SHA256 != sha(data) {
		t.Error("retry transfer hash differs")
	}
	if b, _ := os.ReadFile(final); !bytes.Equal(b, data) {
		t.Errorf("final file has %d bytes, want %d", len(b), len(data))
	}
	if left := tempFiles(t, f.srv.Dir); len(left) > 0 {
		t.Errorf("temp files left after the retry: %v", left)
	}
	if n := f.srv.Conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	// Commands still run on the new connection.
	if _, err := c.Run(ctx, []string{"true"}, nil); err != nil {
		t.Error(err)
	}
}

func TestStagerAndRunShareSessions(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxSessions = 2 // the SFTP client keeps one
	c := f.dial(t)
	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := c.Stager(f.srv.Dir).Put(ctx, strings.NewReader("x"), "x", 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Run(ctx, []string{"sleep", "0.3"}, nil); done <- err }()
	time.Sleep(100 * time.Millisecond)
	// The only free slot is taken: a second Run must wait for it.
	t0 := time.Now()
	if _, err := c.Run(ctx, []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 100*time.Millisecond {
		t.Errorf("second Run did not wait for a slot (%v)", d)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := f.srv.MaxActive.Load(); m != 2 {
		t.Errorf("server saw at most %d sessions, want 2 (sftp + one command)", m)
	}
}

func TestPutCancel(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Stager(f.srv.Dir).Put(ctx, bytes.NewReader(randomBytes(1<<20, 3)), "c", 0)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(f.srv.Dir, "c")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a cancelled Put left a file")
	}
}

func TestTransferAbortsOnStalledServer(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	st := c.Stager(f.srv.Dir)
	defer func(g time.Duration) { abortGrace = g }(abortGrace)
	abortGrace = 200 * time.Millisecond
	// The sftp server (of the session the next Put starts) stops reading;
	// TCP and keepalives stay up.
	f.srv.StallAfter.Store(256 << 10)
	t0 := time.Now()
	_, err := st.Put(ctxTimeout(t, 300*time.Millisecond), bytes.NewReader(randomBytes(8<<20, 5)), "stalled", 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Put returned after %v (deadline 300ms, grace 200ms)", d)
	}
	f.srv.Unstall()
	// A new sftp session on the same connection serves the next transfer.
	if _, err := st.Put(ctxTimeout(t, 10*time.Second), strings.NewReader("after"), "after", 0); err != nil {
		t.Fatalf("Put after the abort: %v", err)
	}
	if n := f.srv.Conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
	if left := tempFiles(t, f.srv.Dir); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func TestConcurrentTransfersAndCommands(t *testing.T) {
	f := newFixture(t)
	f.cfg.MaxSessions = 4
	c := f.dial(t)
	st := c.Stager(f.srv.Dir)
	ctx := ctxTimeout(t, 60*time.Second)
	errs := make(chan error, 24)
	for i := range 8 {
		go func() {
			data := randomBytes(256<<10+i, uint64(100+i))
			name := "par/f" + strings.Repeat("x", i)
			if _, err := st.Put(ctx, bytes.NewReader(data), name, 0); err != nil {
				errs <- err
				return
			}
			var got bytes.Buffer
			tr, err := st.Get(ctx, name, &got)
			if err == nil && (!bytes.Equal(got.Bytes(), data) || tr.SHA256 != sha(data)) {
				err = errors.New("content differs for " + name)
			}
			errs <- err
		}()
		go func() {
			res, err := c.Run(ctx, []string{"echo", name(i)}, nil)
			if err == nil && string(res.Stdout) != name(i)+"\n" {
				err = errors.New("stdout " + string(res.Stdout))
			}
			errs <- err
		}()
		go func() {
			_, err := st.Get(ctx, "missing", &bytes.Buffer{})
			if !errors.Is(err, fs.ErrNotExist) {
				errs <- errors.New("Get missing: " + err.Error())
				return
			}
			errs <- nil
		}()
	}
	for range 24 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if m := f.srv.MaxActive.Load(); m > 4 {
		t.Errorf("server saw %d sessions, MaxSessions is 4", m)
	}
	if n := c.Estimator().Count(); n != 16 {
		t.Errorf("estimator saw %d transfers, want 16", n)
	}
}

func name(i int) string { return "caller-" + string(rune('a'+i)) }
