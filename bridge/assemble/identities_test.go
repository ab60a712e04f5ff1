package assemble

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/bridge/users"
)

type fakeBook struct {
	mu sync.Mutex
	m  map[string]users.Credential
}

func (b *fakeBook) Get(user, site string) (users.Credential, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.m[user+"@"+site]
	return c, ok
}

func (b *fakeBook) Files(c users.Credential) (string, string) {
	cert := ""
	if c.HasCert {
		cert = "/creds/" + c.User + "/" + c.Site + "/key-cert.pub"
	}
	return "/creds/" + c.User + "/" + c.Site + "/key", cert
}

type namedBackend struct {
	backends.Backend
	spec *SiteSpec
}

// TestIdentitiesBuildEachUsersSite: a user's backend is the site's own
// description with the user's login, key (and certificate), account and
// remote directory and no agent; it is built once per credential version;
// a slow build of one user's holds up no other user's; a site not reached
// over SSH has no per-user identities.
func TestIdentitiesBuildEachUsersSite(t *testing.T) {
	site := &SiteSpec{Name: "A", Kind: "slurm", Backend: &plugins.BackendSpec{Builtin: "slurm", Config: plugins.BackendConfig{Name: "A", Kind: "slurm",
		Account: "svc-acct", RemoteDir: "/scratch/svc", SSH: &plugins.SSHConfig{Host: "login", User: "svc", KeyFiles: []string{"/svc/key"}, Agent: true}}}}
	sim := &SiteSpec{Name: "S", Kind: "sim"}
	book := &fakeBook{m: map[string]users.Credential{
		"alice@A": {User: "alice", Site: "A", RemoteUser: "jdoe", Account: "proj", RemoteDir: "work", HasCert: true, Version: "v1"},
		"bob@A":   {User: "bob", Site: "A", Version: "v1"},
		"alice@S": {User: "alice", Site: "S", Version: "v1"},
	}}
	var mu sync.Mutex
	builds := map[string]int{}
	slow := make(chan struct{})
	id := newIdentities(book, map[string]*SiteSpec{"A": site, "S": sim}, func(ctx context.Context, s *SiteSpec) (backends.Backend, io.Closer, error) {
		mu.Lock()
		builds[s.Backend.Config.SSH.User]++
		mu.Unlock()
		if s.Backend.Config.SSH.User == "bob" {
			<-slow
		}
		return namedBackend{spec: s}, nil, nil
	})
	ctx := context.Background()
	done := make(chan struct{})
	go func() { id.Backend(ctx, "A", "bob"); close(done) }()
	time.Sleep(50 * time.Millisecond) // bob's build is under way
	be, err := id.Backend(ctx, "A", "alice")
	if err != nil {
		t.Fatal(err)
	}
	close(slow)
	<-done
	c := be.(namedBackend).spec.Backend.Config
	if c.SSH.User != "jdoe" || len(c.SSH.KeyFiles) != 1 || c.SSH.KeyFiles[0] != "/creds/alice/A/key" || len(c.SSH.CertFiles) != 1 || c.SSH.Agent ||
		c.Account != "proj" || c.RemoteDir != "work" || c.SSH.Host != "login" {
		t.Fatalf("alice's site: %+v ssh %+v", c, *c.SSH)
	}
	if site.Backend.Config.SSH.User != "svc" || site.Backend.Config.Account != "svc-acct" {
		t.Fatal("building alice's identity changed the site's own description")
	}
	if be2, _ := id.Backend(ctx, "A", "alice"); be2.(namedBackend).spec != be.(namedBackend).spec || builds["jdoe"] != 1 {
		t.Fatalf("alice's backend built %d times for one version", builds["jdoe"])
	}
	book.mu.Lock()
	cr := book.m["alice@A"]
	cr.Version = "v2"
	book.m["alice@A"] = cr
	book.mu.Unlock()
	if id.Backend(ctx, "A", "alice"); builds["jdoe"] != 2 {
		t.Fatalf("a new credential version was not built: %d builds", builds["jdoe"])
	}
	if be, err := id.Backend(ctx, "A", "carol"); be != nil || err != nil {
		t.Fatalf("carol has no credential: %v %v", be, err)
	}
	if _, err := id.Backend(ctx, "S", "alice"); !errors.Is(err, ErrNoSSH) {
		t.Fatalf("a simulated site: %v, want ErrNoSSH", err)
	}
	id.Close()
	if _, err := id.Backend(ctx, "A", "bob"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}
