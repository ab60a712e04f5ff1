package users

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func newKey(t *testing.T) ([]byte, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(blk), s
}

// certOf is an OpenSSH user certificate of pub signed by a fresh CA.
func certOf(t *testing.T, pub ssh.PublicKey) []byte {
	t.Helper()
	_, ca := newKey(t)
	c := &ssh.Certificate{Key: pub, CertType: ssh.UserCert, KeyId: "alice@ca", ValidPrincipals: []string{"alice"},
		ValidBefore: ssh.CertTimeInfinity}
	if err := c.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return ssh.MarshalAuthorizedKey(c)
}

// TestCredentials: a credential is stored in 0600 files in 0700
// directories, read back by a new book, replaced whole, removed; bad keys,
// certificates of another key, bad names and unsafe files are refused
// naming the problem.
func TestCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "credentials")
	c, err := OpenCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, signer := newKey(t)
	cert := certOf(t, signer.PublicKey())
	cr, err := c.Add(NewCredential{User: "alice", Site: "siteA", RemoteUser: "jdoe", Account: "proj42", Key: key, Cert: cert}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if cr.Fingerprint != ssh.FingerprintSHA256(signer.PublicKey()) || cr.CertID != "alice@ca" || cr.Login() != "jdoe" || cr.Version == "" {
		t.Fatalf("record %+v", cr)
	}
	keyPath, certPath := c.Files(cr)
	for _, p := range []string{keyPath, certPath, filepath.Join(filepath.Dir(keyPath), "identity.json")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", p, fi, err)
		}
	}
	for _, d := range []string{dir, filepath.Join(dir, "alice"), filepath.Dir(keyPath)} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want mode 0700", d, fi, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(filepath.Dir(keyPath), "identity.json")); strings.Contains(string(b), "PRIVATE KEY") {
		t.Fatal("the record holds the key")
	}
	again, err := OpenCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := again.Get("alice", "siteA"); !ok || got != cr {
		t.Fatalf("reopened: %+v %v, want %+v", got, ok, cr)
	}
	key2, _ := newKey(t)
	cr2, err := c.Add(NewCredential{User: "alice", Site: "siteA", Key: key2}, time.Unix(1, 0))
	if err != nil || cr2.Version == cr.Version || cr2.HasCert {
		t.Fatalf("replaced: %+v %v", cr2, err)
	}
	if _, err := os.Stat(certPath); !os.IsNotExist(err) {
		t.Fatalf("the old certificate survived the replacement: %v", err)
	}

	_, other := newKey(t)
	for _, n := range []struct {
		nc   NewCredential
		want string
	}{
		{NewCredential{User: "alice", Site: "siteA", Key: []byte("not a key")}, "not an OpenSSH or PEM private key"},
		{NewCredential{User: "alice", Site: "siteA", Key: key, Cert: certOf(t, other.PublicKey())}, "not of the given key"},
		{NewCredential{User: "alice", Site: "siteA", Key: key, Cert: ssh.MarshalAuthorizedKey(signer.PublicKey())}, "not a user certificate"},
		{NewCredential{User: "alice", Site: "../x", Key: key}, "not a site name"},
		{NewCredential{User: "al/ice", Site: "siteA", Key: key}, "invalid user name"},
		{NewCredential{User: "alice", Site: "siteA", RemoteUser: "Root;rm", Key: key}, "not a login name"},
		{NewCredential{User: "alice", Site: "siteA", Account: "a b", Key: key}, "not a batch-system name"},
		{NewCredential{User: "alice", Site: "siteA", RemoteDir: "x/../../etc", Key: key}, "without '..'"},
	} {
		if _, err := c.Add(n.nc, time.Unix(2, 0)); err == nil || !strings.Contains(err.Error(), n.want) {
			t.Errorf("Add(%+v): %v, want an error saying %q", n.nc.Site+"/"+n.nc.User, err, n.want)
		}
	}
	if got, _ := c.Get("alice", "siteA"); got != cr2 {
		t.Fatal("a refused Add changed the stored credential")
	}

	// Unsafe files are refused at open.
	os.Chmod(filepath.Dir(keyPath), 0o755)
	if _, err := OpenCredentials(dir); !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("a directory readable by others: %v", err)
	}
	os.Chmod(filepath.Dir(keyPath), 0o700)
	os.Chmod(keyPath, 0o644)
	if _, err := OpenCredentials(dir); !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key readable by others: %v", err)
	}
	os.Chmod(keyPath, 0o600)

	if _, err := c.Remove("alice", "siteA"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(keyPath)); !os.IsNotExist(err) {
		t.Fatalf("removed, but its directory is there: %v", err)
	}
	if _, err := c.Remove("alice", "siteA"); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("removed twice: %v", err)
	}
	if l := c.List(""); len(l) != 0 {
		t.Fatalf("list after remove: %+v", l)
	}
}
