package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// realSSHDConfig is the Config for site A of the SLURM testbed
// (scripts/slurm-testbed.sh: source its testbed.env first), or a skip.
func realSSHDConfig(t testing.TB) Config {
	t.Helper()
	key := os.Getenv("GRIDSUB_SSH_KEY")
	if key == "" {
		t.Skip("no real sshd: start the testbed (bash scripts/slurm-testbed.sh start) and " +
			"source /var/tmp/gridsub-local-testbed/testbed.env so that GRIDSUB_SSH_KEY is set (scripts/test.sh does both)")
	}
	port, err := strconv.Atoi(os.Getenv("GRIDSUB_SITEA_SSH_PORT"))
	if err != nil {
		t.Fatalf("GRIDSUB_SITEA_SSH_PORT=%q: %v", os.Getenv("GRIDSUB_SITEA_SSH_PORT"), err)
	}
	user := os.Getenv("GRIDSUB_SSH_USER")
	if user == "" {
		user = "griduser"
	}
	host := os.Getenv("GRIDSUB_SSH_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	return Config{
		Host: host, Port: port, User: user,
		KeyFiles:   []string{key},
		KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")},
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// realScratch is a fresh directory at the real site, removed at cleanup.
func realScratch(t testing.TB, c *Client) string {
	t.Helper()
	base := os.Getenv("GRIDSUB_SITEA_SCRATCH")
	if base == "" {
		base = "."
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	dir := path.Join(base, "gridsub-transport-test-"+hex.EncodeToString(rnd[:]))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Run(ctx, []string{"rm", "-rf", "--", dir}, nil)
	})
	return dir
}

func TestRealSSHD(t *testing.T) {
	cfg := realSSHDConfig(t)
	ctx := ctxTimeout(t, 60*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("Dial %s: %v", cfg.target(), err)
	}
	defer c.Close()

	t.Run("quoting", func(t *testing.T) {
		owned := "/tmp/gridsub-owned-" + strconv.Itoa(os.Getpid())
		args := []string{"$(touch " + owned + "); echo pwned", "it's \"q\"", "a\nb", "*", "~", "", "k=v"}
		res, err := c.Run(ctx, append([]string{"printf", `%s\n`}, args...), nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Run: %v exit %d stderr %q", err, res.ExitCode, res.Stderr)
		}
		if want := strings.Join(args, "\n") + "\n"; string(res.Stdout) != want {
			t.Errorf("got %q want %q", res.Stdout, want)
		}
		if _, err := os.Stat(owned); !errors.Is(err, os.ErrNotExist) {
			os.Remove(owned)
			t.Errorf("%s was created: an argument was executed", owned)
		}
	})

	t.Run("exit status and env", func(t *testing.T) {
		res, err := c.Run(ctx, []string{"sh", "-c", "echo $GRIDSUB_SITE; exit 7"}, nil)
		if err != nil || res.ExitCode != 7 {
			t.Fatalf("got exit %d, %v; want 7, nil", res.ExitCode, err)
		}
		t.Logf("GRIDSUB_SITE=%s", bytes.TrimSpace(res.Stdout))
		res, err = c.Run(ctx, []string{"env", "GRIDSUB_X=a b$(c)", "sh", "-c", `printf %s "$GRIDSUB_X"`}, nil)
		if err != nil || string(res.Stdout) != "a b$(c)" {
			t.Errorf("env value: %q %v", res.Stdout, err)
		}
	})

	t.Run("concurrent commands beyond MaxSessions", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 3 * DefaultMaxSessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.Run(ctx, []string{"sh", "-c", "sleep 0.2; echo " + strconv.Itoa(i)}, nil)
				if err != nil || string(res.Stdout) != strconv.Itoa(i)+"\n" {
					t.Errorf("caller %d: %q %v", i, res.Stdout, err)
				}
			}()
		}
		wg.Wait()
	})

	t.Run("cancel", func(t *testing.T) {
		tag := fmt.Sprintf("31.%d", os.Getpid()%1000) // a recognisable sleep
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(300*time.Millisecond, cancel)
		t0 := time.Now()
		_, err := c.Run(cctx, []string{"sleep", tag}, nil)
		if !errors.Is(err, context.Canceled) || time.Since(t0) > 1300*time.Millisecond {
			t.Fatalf("got %v after %v", err, time.Since(t0))
		}
		// sshd delivered the SIGTERM: the sleep is gone.
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, err := c.Run(ctx, []string{"pgrep", "-f", "sleep " + tag}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("remote sleep %s still running: %s", tag, res.Stdout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("staging", func(t *testing.T) {
		st := c.Stager(realScratch(t, c))
		data := randomBytes(5<<20+3, 11)
		tr, err := st.Put(ctx, bytes.NewReader(data), "in/data.bin", 0o600)
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		if tr.SHA256 != sha(data) || tr.Bytes != int64(len(data)) {
			t.Errorf("Put transfer %+v", tr)
		}
		res, err := c.Run(ctx, []string{"sha256sum", path.Join(st.Root(), "in/data.bin")}, nil)
		if err != nil || !strings.HasPrefix(string(res.Stdout), sha(data)) {
			t.Errorf("remote sha256sum %q %v, want %s", res.Stdout, err, sha(data))
		}
		res, _ = c.Run(ctx, []string{"stat", "-c", "%a", path.Join(st.Root(), "in/data.bin")}, nil)
		if strings.TrimSpace(string(res.Stdout)) != "600" {
			t.Errorf("remote mode %q, want 600", res.Stdout)
		}
		var got bytes.Buffer
		if tr, err := st.Get(ctx, "in/data.bin", &got); err != nil || !bytes.Equal(got.Bytes(), data) || tr.SHA256 != sha(data) {
			t.Errorf("Get: %d bytes, %+v, %v", got.Len(), tr, err)
		}
		sc, err := c.sftpClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ext := range []string{"fsync@openssh.com", "posix-rename@openssh.com"} {
			if _, ok := sc.HasExtension(ext); !ok {
				t.Errorf("OpenSSH's sftp server does not offer %s", ext)
			}
		}
		res, _ = c.Run(ctx, []string{"find", st.Root(), "-name", "*.gridsub-tmp-*"}, nil)
		if len(bytes.TrimSpace(res.Stdout)) > 0 {
			t.Errorf("temp files left: %s", res.Stdout)
		}
		if _, err := st.Put(ctx, strings.NewReader("x"), "../escape", 0); !errors.Is(err, backends.ErrInvalidSpec) {
			t.Errorf("escape: %v", err)
		}
	})

	t.Run("changed host key", func(t *testing.T) {
		bad := cfg
		bad.KnownHosts = []string{writeKnownHosts(t, knownHostsLineFor(knownHostsName(withPort(cfg)), newEd25519Signer(t).PublicKey()))}
		_, err := Dial(ctx, bad)
		if !errors.Is(err, ErrHostKeyChanged) {
			t.Fatalf("got %v, want ErrHostKeyChanged", err)
		}
		t.Log(err)
	})
}

func withPort(cfg Config) Config {
	if cfg.Port == 0 {
		cfg.Port = 22
	}
	return cfg
}
