package config

import (
	"errors"
	"strings"
	"testing"
)

// TestStoreSection: the store section's kinds, its DSN, and where its
// password may come from (never the file itself).
func TestStoreSection(t *testing.T) {
	const sites = "sites: [{name: A, kind: sim, nodes: 1}]\n"
	home := map[string]string{"HOME": "/h"}
	c, err := Parse("s.yaml", []byte(sites), env(home))
	if err != nil || c.Store.Kind != "sqlite" || c.Store.DSN != "" {
		t.Fatalf("default store = %+v, %v; want sqlite", c.Store, err)
	}
	c, err = Parse("s.yaml", []byte(sites+"store: {kind: postgres, dsn: \"host=db user=g dbname=g\", password_file: /etc/gridsub/pgpass}\n"), env(home))
	if err != nil || c.Store.Kind != "postgres" || c.Store.DSN != "host=db user=g dbname=g" || c.Store.PasswordFile != "/etc/gridsub/pgpass" {
		t.Fatalf("postgres store = %+v, %v", c.Store, err)
	}
	e := map[string]string{"HOME": "/h", "GRIDSUB_STORE_KIND": "postgres", "GRIDSUB_STORE_DSN": "postgres://g@db/g", "GRIDSUB_STORE_PASSWORD_ENV": "PGPW"}
	c, err = Parse("s.yaml", []byte(sites), env(e))
	if err != nil || c.Store.Kind != "postgres" || c.Store.DSN != "postgres://g@db/g" || c.Store.PasswordEnv != "PGPW" {
		t.Fatalf("store from the environment = %+v, %v", c.Store, err)
	}
	for _, tc := range []struct {
		src, key, msg string
		sentinel      error
	}{
		{"store: {kind: postgres, dsn: \"host=db password=hunter2\"}", "store.dsn", "store.password_file", ErrInvalid},
		{"store: {kind: postgres, dsn: \"postgres://g:hunter2@db/g\"}", "store.dsn", "store.password_env", ErrInvalid},
		{"store: {kind: postgres, dsn: \"host=db\", password: hunter2}", "store.password", "store.password_file", ErrSecret},
		{"store: {kind: postgres}", "store.dsn", "needs a dsn", ErrInvalid},
		{"store: {kind: mysql}", "store.kind", "sqlite (the default) or postgres", ErrInvalid},
		{"store: {kind: sqlite, dsn: \"host=db\"}", "store", "for kind: postgres", ErrInvalid},
		{"store: {kind: postgres, dsn: \"host=db\", password_file: /p, password_env: X}", "store", "not both", ErrInvalid},
		{"store: {kind: postgres, dsn: \"host=db\", password_file: rel/p}", "store.password_file", "absolute", ErrInvalid},
		{"store: {kind: sqlite, shared: true}", "store.shared", "postgres only", ErrInvalid},
		{"store: {kind: postgres, dsn: \"host=db\", shared: true}", "sites[0].kind", "cannot share", ErrInvalid},
		{"store: {kind: postgres, dsn: \"host=db\", lease: 100ms}", "store.lease", "from 1s to 1m", ErrInvalid},
	} {
		_, err := Parse("s.yaml", []byte(sites+tc.src+"\n"), env(home))
		if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), "s.yaml: "+tc.key+": ") || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want %v at %s saying %q", tc.src, err, tc.sentinel, tc.key, tc.msg)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the password leaks into the error: %v", tc.src, err)
		}
	}
}
