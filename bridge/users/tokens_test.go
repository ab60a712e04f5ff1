package users

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TokensFile)
	tk, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	a, ai, err := tk.Create("alice", false, now)
	if err != nil {
		t.Fatal(err)
	}
	o, _, err := tk.Create("ops", true, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, TokenPrefix) || len(a) != len(TokenPrefix)+64 || ai.Hash != "" {
		t.Fatalf("token %q info %+v", a, ai)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(path)
	if bytes.Contains(b, []byte(a)) || bytes.Contains(b, []byte(o)) {
		t.Fatal("a token is stored in clear")
	}
	// A new book on the same file knows them (the daemon restarted).
	tk2, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if u, admin, ok := tk2.Lookup(a); !ok || u != "alice" || admin {
		t.Fatalf("lookup alice: %q %v %v", u, admin, ok)
	}
	if u, admin, ok := tk2.Lookup(o); !ok || u != "ops" || !admin {
		t.Fatalf("lookup ops: %q %v %v", u, admin, ok)
	}
	for _, bad := range []string{"", "gst_", a + "x", strings.ToUpper(a)} {
		if _, _, ok := tk2.Lookup(bad); ok {
			t.Fatalf("%q is accepted", bad)
		}
	}
	if l := tk2.List(); len(l) != 2 || l[0].Hash != "" || l[0].User != "alice" {
		t.Fatalf("list %+v", l)
	}
	if _, err := tk2.Revoke("nope"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("revoke unknown: %v", err)
	}
	if gone, err := tk2.Revoke("user:alice"); err != nil || len(gone) != 1 {
		t.Fatalf("revoke alice: %v %v", gone, err)
	}
	if _, _, ok := tk2.Lookup(a); ok {
		t.Fatal("a revoked token is accepted")
	}
	if tk3, _ := OpenTokens(path); len(tk3.List()) != 1 {
		t.Fatal("the revocation was not saved")
	}
	if _, _, err := tk.Create("bad name", false, now); !errors.Is(err, ErrBadUser) {
		t.Fatalf("bad user: %v", err)
	}
	// Unsafe files are refused.
	os.Chmod(path, 0o644)
	if _, err := OpenTokens(path); !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a 0644 file: %v", err)
	}
	os.Chmod(path, 0o600)
	link := filepath.Join(dir, "link.json")
	os.Symlink(path, link)
	if _, err := OpenTokens(link); !errors.Is(err, ErrFile) {
		t.Fatalf("a symbolic link: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte("{not json"), 0o600)
	if _, err := OpenTokens(garbage); !errors.Is(err, ErrFile) {
		t.Fatalf("garbage: %v", err)
	}
}
