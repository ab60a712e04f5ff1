package users

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Sentinel errors.
var (
	// ErrBadUser: a user name that is not a plain account name.
	ErrBadUser = errors.New("invalid user name")
	// ErrNoToken: no token has the id.
	ErrNoToken = errors.New("no such token")
	// ErrFile: a tokens or credentials file is unsafe or unreadable
	// (wrong mode or owner, not a regular file, too large, not JSON).
	ErrFile = errors.New("users file")
)

// TokensFile is the tokens file's name in the state directory.
const TokensFile = "tokens.json"

// TokenPrefix starts every token, so that a leaked one is recognised.
const TokenPrefix = "gst_"

// maxFile bounds a tokens or credentials file.
const maxFile = 4 << 20

var userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$`)

// CheckUser says whether name can be a user: a plain account name of at
// most 64 characters (letters, digits, _ . @ -; not starting with . @ -).
func CheckUser(name string) error {
	if !userRE.MatchString(name) {
		return fmt.Errorf("%w %q: use letters, digits, '_', '.', '@' and '-' (at most 64), as an account name", ErrBadUser, name)
	}
	return nil
}

// TokenInfo is what is kept of a token: never the token itself.
type TokenInfo struct {
	ID      string    `json:"id"`
	User    string    `json:"user"`
	Admin   bool      `json:"admin"`
	Created time.Time `json:"created"`
	Hash    string    `json:"sha256,omitempty"` // hex SHA-256 of the token; not shown by List
}

// Tokens is the per-user token book of a daemon: a JSON file of mode
// 0600, rewritten whole (to a temporary file, synced, renamed) on every
// change. Safe for concurrent use.
type Tokens struct {
	path string
	mu   sync.Mutex
	list []TokenInfo
}

// OpenTokens reads the tokens file at path (none yet: an empty book). A
// file readable by anyone but its owner, or not owned by this process's
// user, is refused.
func OpenTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	b, err := readPrivate(path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &t.list); err != nil {
		return nil, fmt.Errorf("%w: %s is not a token list: %w", ErrFile, path, err)
	}
	return t, nil
}

// readPrivate reads a regular file of at most maxFile bytes that only its
// owner (this process's user) can read or write, without following a
// symbolic link and without blocking on a FIFO.
func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrFile, path)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxFile {
		return nil, fmt.Errorf("%w: %s must be a regular file of at most %d bytes", ErrFile, path, maxFile)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; it holds secrets: chmod 600 %s", ErrFile, path, m, path)
	}
	if uid, ok := ownerUID(fi); ok && uid != os.Getuid() {
		return nil, fmt.Errorf("%w: %s belongs to uid %d, not to this daemon's user (uid %d)", ErrFile, path, uid, os.Getuid())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("%w: %s grew past %d bytes while being read", ErrFile, path, maxFile)
	}
	return b, nil
}

// writePrivate replaces path with b atomically, mode 0600.
func writePrivate(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (t *Tokens) saveLocked() error {
	b, err := json.MarshalIndent(t.list, "", "  ")
	if err != nil {
		return err
	}
	if err := writePrivate(t.path, b); err != nil {
		return fmt.Errorf("users: saving %s: %w", t.path, err)
	}
	return nil
}

func hashOf(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never on Linux
	}
	return hex.EncodeToString(b)
}

// Create makes a token for user (an administrator's when admin) and
// returns it with its record. The token (TokenPrefix and 32 random bytes
// in hex) is returned here only: the book keeps its SHA-256.
func (t *Tokens) Create(user string, admin bool, now time.Time) (string, TokenInfo, error) {
	if err := CheckUser(user); err != nil {
		return "", TokenInfo{}, err
	}
	tok := TokenPrefix + randomHex(32)
	info := TokenInfo{ID: randomHex(6), User: user, Admin: admin, Created: now.UTC(), Hash: hashOf(tok)}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.list = append(t.list, info)
	if err := t.saveLocked(); err != nil {
		t.list = t.list[:len(t.list)-1]
		return "", TokenInfo{}, err
	}
	info.Hash = ""
	return tok, info, nil
}

// List returns the tokens' records, oldest first, without their hashes.
func (t *Tokens) List() []TokenInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.list)
	for i := range out {
		out[i].Hash = ""
	}
	return out
}

// Revoke removes the token with this id, or every token of the user
// named by "user:NAME"; it returns the records removed, or ErrNoToken.
func (t *Tokens) Revoke(id string) ([]TokenInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []TokenInfo
	keep := t.list[:0:0]
	for _, ti := range t.list {
		if ti.ID == id || "user:"+ti.User == id {
			ti.Hash = ""
			gone = append(gone, ti)
			continue
		}
		keep = append(keep, ti)
	}
	if len(gone) == 0 {
		return nil, fmt.Errorf("%w %q (gridsub token list shows the ids)", ErrNoToken, id)
	}
	old := t.list
	t.list = keep
	if err := t.saveLocked(); err != nil {
		t.list = old
		return nil, err
	}
	return gone, nil
}

// Lookup finds the user of a token (api.TokenBook): every stored hash is
// compared in constant time.
func (t *Tokens) Lookup(token string) (string, bool, bool) {
	h := []byte(hashOf(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	user, admin, found := "", false, false
	for _, ti := range t.list {
		if subtle.ConstantTimeCompare(h, []byte(ti.Hash)) == 1 {
			user, admin, found = ti.User, ti.Admin, true
		}
	}
	return user, admin, found
}
