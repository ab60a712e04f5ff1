package users

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// CredentialsDir is the credentials' directory in the state directory.
const CredentialsDir = "credentials"

// ErrNoCredential: the user has no identity at the site.
var ErrNoCredential = errors.New("no such credential")

// ErrBadCredential: a credential that cannot be used as given (a key that
// is not an unencrypted private key, a certificate not of that key, a bad
// site, login or account name, a remote directory that escapes).
var ErrBadCredential = errors.New("invalid credential")

// maxKey bounds a key or certificate file.
const maxKey = 64 << 10

var (
	siteRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	loginRE   = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}\$?$`)
	accountRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._@-]{0,63})?$`)
)

// Credential is one user's identity at one site: the login, key (and
// certificate) and account their jobs use there.
type Credential struct {
	User string `json:"user"` // the gridsub user whose jobs use it
	Site string `json:"site"`
	// RemoteUser is the login name at the site ("" = User).
	RemoteUser string `json:"remote_user,omitempty"`
	// Account is charged for the user's jobs at the site that name none
	// ("" = the site's configured account).
	Account string `json:"account,omitempty"`
	// RemoteDir holds the user's job directories at the site ("" = the
	// site's remote_dir); relative to the login directory unless absolute.
	RemoteDir string `json:"remote_dir,omitempty"`
	// Fingerprint is the key's public SHA-256 fingerprint (as ssh-keygen
	// -l prints it); CertID the certificate's key id, when one is held.
	Fingerprint string    `json:"fingerprint"`
	CertID      string    `json:"cert_id,omitempty"`
	HasCert     bool      `json:"cert,omitempty"`
	Created     time.Time `json:"created"`
	// Version changes whenever the credential is replaced (a hash of its
	// record and files), so a user of it knows to rebuild.
	Version string `json:"version"`
}

// Login is the login name at the site.
func (c Credential) Login() string {
	if c.RemoteUser != "" {
		return c.RemoteUser
	}
	return c.User
}

// NewCredential is what Add takes: the credential's record and its key
// (and certificate) as bytes. The key must be an unencrypted OpenSSH or
// PEM private key: the daemon has nobody to ask for a passphrase.
type NewCredential struct {
	User, Site, RemoteUser, Account, RemoteDir string
	Key, Cert                                  []byte
}

// Credentials are the per-user, per-site identities of a daemon: under
// <state_dir>/credentials/<user>/<site>/, a directory of mode 0700 holding
// the key ("key"), the certificate ("key-cert.pub", if any) and the record
// ("identity.json"), each of mode 0600 and owned by the daemon's user —
// never in the job store, never logged. Loaded once by OpenCredentials;
// Add and Remove change the files and the memory together. Safe for
// concurrent use.
type Credentials struct {
	root string
	mu   sync.Mutex
	m    map[[2]string]Credential // (user, site)
}

// OpenCredentials reads every credential under dir (none yet: an empty
// book). A file or directory readable by others, not the daemon's user's,
// or a symbolic link, is refused with ErrFile naming it.
func OpenCredentials(dir string) (*Credentials, error) {
	c := &Credentials{root: dir, m: map[[2]string]Credential{}}
	users, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFile, dir, err)
	}
	if err := checkPrivateDir(dir); err != nil {
		return nil, err
	}
	for _, u := range users {
		if !u.IsDir() || CheckUser(u.Name()) != nil {
			return nil, fmt.Errorf("%w: %s: unexpected entry %q (one directory per user)", ErrFile, dir, u.Name())
		}
		udir := filepath.Join(dir, u.Name())
		if err := checkPrivateDir(udir); err != nil {
			return nil, err
		}
		sites, err := os.ReadDir(udir)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrFile, udir, err)
		}
		for _, s := range sites {
			if strings.HasPrefix(s.Name(), ".") {
				continue // an Add that did not finish
			}
			sdir := filepath.Join(udir, s.Name())
			if !s.IsDir() || !siteRE.MatchString(s.Name()) {
				return nil, fmt.Errorf("%w: %s: unexpected entry %q (one directory per site)", ErrFile, udir, s.Name())
			}
			if err := checkPrivateDir(sdir); err != nil {
				return nil, err
			}
			cr, err := readCredential(sdir)
			if err != nil {
				return nil, err
			}
			if cr.User != u.Name() || cr.Site != s.Name() {
				return nil, fmt.Errorf("%w: %s holds the credential of user %q at site %q", ErrFile, sdir, cr.User, cr.Site)
			}
			c.m[[2]string{cr.User, cr.Site}] = cr
		}
	}
	return c, nil
}

// checkPrivateDir refuses a directory that is a symbolic link, readable by
// others, or not the daemon's user's.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrFile, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (a symbolic link?)", ErrFile, dir)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o; it holds secrets: chmod 700 %s", ErrFile, dir, m, dir)
	}
	if uid, ok := ownerUID(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("%w: %s belongs to uid %d, not to this daemon's user (uid %d)", ErrFile, dir, uid, os.Getuid())
	}
	return nil
}

// readCredential reads and checks one credential directory.
func readCredential(dir string) (Credential, error) {
	var cr Credential
	b, err := readPrivate(filepath.Join(dir, "identity.json"))
	if err != nil {
		return cr, err
	}
	if err := json.Unmarshal(b, &cr); err != nil {
		return cr, fmt.Errorf("%w: %s/identity.json is not a credential record: %w", ErrFile, dir, err)
	}
	key, err := readPrivate(filepath.Join(dir, "key"))
	if err != nil {
		return cr, err
	}
	var cert []byte
	if cr.HasCert {
		if cert, err = readPrivate(filepath.Join(dir, "key-cert.pub")); err != nil {
			return cr, err
		}
	}
	fp, _, err := checkKey(key, cert)
	if err != nil {
		return cr, fmt.Errorf("%w: %s: %w", ErrFile, dir, err)
	}
	if fp != cr.Fingerprint {
		return cr, fmt.Errorf("%w: %s: the key's fingerprint %s is not the record's %s", ErrFile, dir, fp, cr.Fingerprint)
	}
	return cr, nil
}

// checkKey parses an unencrypted private key and, if given, a certificate
// of it; it returns the key's fingerprint and the certificate's key id.
func checkKey(key, cert []byte) (string, string, error) {
	if len(key) == 0 || len(key) > maxKey {
		return "", "", fmt.Errorf("%w: the key must be a private key file of 1 to %d bytes", ErrBadCredential, maxKey)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		var pp *ssh.PassphraseMissingError
		if errors.As(err, &pp) {
			return "", "", fmt.Errorf("%w: the key is encrypted with a passphrase; the daemon has nobody to ask for it: give an unencrypted key kept only for gridsub (ssh-keygen -p -N '' -f COPY)", ErrBadCredential)
		}
		return "", "", fmt.Errorf("%w: the key is not an OpenSSH or PEM private key: %v", ErrBadCredential, err)
	}
	fp := ssh.FingerprintSHA256(signer.PublicKey())
	if cert == nil {
		return fp, "", nil
	}
	if len(cert) > maxKey {
		return "", "", fmt.Errorf("%w: the certificate must be at most %d bytes", ErrBadCredential, maxKey)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(cert)
	if err != nil {
		return "", "", fmt.Errorf("%w: the certificate is not an OpenSSH certificate (KEY-cert.pub): %v", ErrBadCredential, err)
	}
	c, ok := pub.(*ssh.Certificate)
	if !ok || c.CertType != ssh.UserCert {
		return "", "", fmt.Errorf("%w: the certificate file holds a plain public key or a host certificate, not a user certificate", ErrBadCredential)
	}
	if ssh.FingerprintSHA256(c.Key) != fp {
		return "", "", fmt.Errorf("%w: the certificate is of key %s, not of the given key %s", ErrBadCredential, ssh.FingerprintSHA256(c.Key), fp)
	}
	return fp, c.KeyId, nil
}

// Add checks n and stores it as user n.User's identity at n.Site,
// replacing any earlier one: the files are written into a new directory,
// which then takes the place of the old one. It returns the record.
func (c *Credentials) Add(n NewCredential, now time.Time) (Credential, error) {
	if err := CheckUser(n.User); err != nil {
		return Credential{}, err
	}
	switch {
	case !siteRE.MatchString(n.Site):
		return Credential{}, fmt.Errorf("%w: site %q is not a site name", ErrBadCredential, n.Site)
	case n.RemoteUser != "" && !loginRE.MatchString(n.RemoteUser):
		return Credential{}, fmt.Errorf("%w: remote user %q is not a login name (lower-case letters, digits, '_', '.', '-'; at most 32)", ErrBadCredential, n.RemoteUser)
	case !accountRE.MatchString(n.Account):
		return Credential{}, fmt.Errorf("%w: account %q is not a batch-system name (letters, digits, '.', '_', '-', '@', up to 64)", ErrBadCredential, n.Account)
	}
	if err := checkRemoteDir(n.RemoteDir); err != nil {
		return Credential{}, err
	}
	fp, certID, err := checkKey(n.Key, n.Cert)
	if err != nil {
		return Credential{}, err
	}
	cr := Credential{User: n.User, Site: n.Site, RemoteUser: n.RemoteUser, Account: n.Account, RemoteDir: n.RemoteDir,
		Fingerprint: fp, CertID: certID, HasCert: n.Cert != nil, Created: now.UTC()}
	h := sha256.New()
	rec, _ := json.Marshal(cr)
	h.Write(rec)
	h.Write(n.Key)
	h.Write(n.Cert)
	cr.Version = hex.EncodeToString(h.Sum(nil))[:16]
	rec, err = json.MarshalIndent(cr, "", "  ")
	if err != nil {
		return Credential{}, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	udir := filepath.Join(c.root, n.User)
	for _, d := range []string{c.root, udir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return Credential{}, fmt.Errorf("users: %w", err)
		}
		if err := checkPrivateDir(d); err != nil {
			return Credential{}, err
		}
	}
	tmp, err := os.MkdirTemp(udir, "."+n.Site+".new-")
	if err != nil {
		return Credential{}, fmt.Errorf("users: %w", err)
	}
	defer os.RemoveAll(tmp)
	files := [][2]any{{"key", n.Key}, {"identity.json", rec}}
	if n.Cert != nil {
		files = append(files, [2]any{"key-cert.pub", n.Cert})
	}
	for _, f := range files {
		if err := writePrivate(filepath.Join(tmp, f[0].(string)), f[1].([]byte)); err != nil {
			return Credential{}, fmt.Errorf("users: writing the credential of %s at %s: %w", n.User, n.Site, err)
		}
	}
	dst := filepath.Join(udir, n.Site)
	old := ""
	if _, err := os.Lstat(dst); err == nil {
		old = filepath.Join(udir, "."+n.Site+".old-"+randomHex(4))
		if err := os.Rename(dst, old); err != nil {
			return Credential{}, fmt.Errorf("users: replacing the credential of %s at %s: %w", n.User, n.Site, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if old != "" {
			_ = os.Rename(old, dst)
		}
		return Credential{}, fmt.Errorf("users: storing the credential of %s at %s: %w", n.User, n.Site, err)
	}
	if old != "" {
		_ = os.RemoveAll(old)
	}
	c.m[[2]string{n.User, n.Site}] = cr
	return cr, nil
}

// checkRemoteDir refuses a remote directory with "..", a NUL or a newline.
func checkRemoteDir(d string) error {
	if d == "" {
		return nil
	}
	if len(d) > 1024 || strings.ContainsAny(d, "\x00\n\r") || slices.Contains(strings.Split(d, "/"), "..") {
		return fmt.Errorf("%w: remote directory %q must be a path without '..', NUL or newline, at most 1024 bytes", ErrBadCredential, d)
	}
	return nil
}

// Get returns user's identity at site, if any.
func (c *Credentials) Get(user, site string) (Credential, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr, ok := c.m[[2]string{user, site}]
	return cr, ok
}

// Files are the paths of a credential's key and certificate ("" when it
// has none), for the SSH transport to read.
func (c *Credentials) Files(cr Credential) (key, cert string) {
	dir := filepath.Join(c.root, cr.User, cr.Site)
	if cr.HasCert {
		cert = filepath.Join(dir, "key-cert.pub")
	}
	return filepath.Join(dir, "key"), cert
}

// List returns the credentials of user ("" = everyone's), by user then
// site.
func (c *Credentials) List(user string) []Credential {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Credential
	for k, cr := range c.m {
		if user == "" || k[0] == user {
			out = append(out, cr)
		}
	}
	slices.SortFunc(out, func(a, b Credential) int {
		return strings.Compare(a.User+"\x00"+a.Site, b.User+"\x00"+b.Site)
	})
	return out
}

// Remove deletes user's identity at site (its files first), or returns
// ErrNoCredential.
func (c *Credentials) Remove(user, site string) (Credential, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr, ok := c.m[[2]string{user, site}]
	if !ok {
		return Credential{}, fmt.Errorf("%w: user %s has none at site %s (gridsub credentials list)", ErrNoCredential, user, site)
	}
	if err := os.RemoveAll(filepath.Join(c.root, user, site)); err != nil {
		return Credential{}, fmt.Errorf("users: removing the credential of %s at %s: %w", user, site, err)
	}
	delete(c.m, [2]string{user, site})
	return cr, nil
}

// ownerUID is the uid owning a file, where the system says.
func ownerUID(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
