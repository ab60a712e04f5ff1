package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gridsub/gridsub/bridge/api/apitest"
	"github.com/gridsub/gridsub/bridge/daemon"
)

// TestCLIOverTLS: the CLI talks to a daemon served over TLS when
// GRIDSUB_CA names the certificate's CA, refuses an untrusted one, and
// `gridsub serve` refuses clear text on every interface and a short token.
func TestCLIOverTLS(t *testing.T) {
	d, err := os.MkdirTemp("", "gstls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	state, sock := filepath.Join(d, "state"), filepath.Join(d, "gridsub.sock")
	cert, key := apitest.SelfSigned(t)
	const token = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	dm, err := daemon.Start(context.Background(), daemon.Options{Spec: twoSites(new(atomic.Bool)), StateDir: state, Socket: sock,
		Listen: "127.0.0.1:0", Token: token, TLSCert: cert, TLSKey: key, Cron: map[string]string{"cycle": "@every 1h", "health": "@every 1h"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dm.Shutdown(context.Background()) })
	url := "https://" + dm.TCPAddr()
	t.Setenv(envURL, url)
	t.Setenv(envToken, token)

	t.Setenv(envCA, cert)
	if code, stdout, stderr := cli("sites"); code != 0 || !strings.HasPrefix(stdout, "daemon: "+url+"\n") {
		t.Fatalf("sites over TLS with GRIDSUB_CA: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Setenv(envCA, "")
	if code, _, stderr := cli("sites"); code != exitInternal || !strings.Contains(stderr, "certificate signed by unknown authority") {
		t.Errorf("sites without the CA: exit %d %s", code, stderr)
	}
	t.Setenv(envCA, "/dev/zero")
	if code, _, stderr := cli("sites"); code != exitUsage || !strings.Contains(stderr, "GRIDSUB_CA") || !strings.Contains(stderr, "regular file") {
		t.Errorf("GRIDSUB_CA=/dev/zero: exit %d %s", code, stderr)
	}

	// serve: refused before it binds or touches the state directory's socket.
	t.Setenv(envStateDir, filepath.Join(d, "state2"))
	t.Setenv(envSocket, filepath.Join(d, "s2.sock"))
	if code, _, stderr := cli("serve", "--listen", "0.0.0.0:0"); code != exitUsage || !strings.Contains(stderr, "broker.insecure_plaintext") {
		t.Errorf("serve --listen 0.0.0.0:0 without TLS: exit %d %s", code, stderr)
	}
	t.Setenv(envToken, "s3cret")
	if code, _, stderr := cli("serve", "--listen", "127.0.0.1:0"); code != exitUsage || !strings.Contains(stderr, "openssl rand -hex 32") || strings.Contains(stderr, "s3cret") {
		t.Errorf("serve with a short token: exit %d %s", code, stderr)
	}
}
