package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/store"
)

// BackupRoute backs the running daemon's store up into a file (VACUUM
// INTO: a consistent snapshot taken without stopping the daemon). It is
// served on the unix socket only — whoever can reach the socket is the
// daemon's own user, who may write that file anyway — never over TCP,
// where a token holder must not choose a path the daemon writes.
//
// Request body: BackupRequest. Answer: 200 with the backup's
// store.Report (checked with integrity_check); 400 {"error"} for a path
// that is not absolute, already exists, or whose directory is missing;
// 500 {"error"} when the backup failed (the partial file is removed).
const BackupRoute = "POST /v1/store/backup"

// BackupRequest is the body of BackupRoute.
type BackupRequest struct {
	Path string `json:"path"` // absolute; must not exist; created 0600
}

// backupHandler serves BackupRoute.
func (d *Daemon) backupHandler(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, err error) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
	}
	if p, ok := api.PeerOf(r); !ok || !p.Admin {
		fail(http.StatusForbidden, errors.New("a backup of the store is for administrators only (root or the daemon's own user)"))
		return
	}
	var req BackupRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(http.StatusBadRequest, fmt.Errorf("backup request: %w", err))
		return
	}
	p := req.Path
	switch {
	case p == "" || !filepath.IsAbs(p) || strings.ContainsRune(p, 0):
		fail(http.StatusBadRequest, fmt.Errorf("backup: path %q must be absolute", p))
		return
	case filepath.Clean(p) == filepath.Clean(d.st.Where()) || strings.HasPrefix(filepath.Clean(p), filepath.Clean(d.st.Where())+"-"):
		fail(http.StatusBadRequest, fmt.Errorf("backup: %s is the live database or one of its files", p))
		return
	}
	if _, err := os.Lstat(p); err == nil {
		fail(http.StatusBadRequest, fmt.Errorf("backup: %s already exists; choose a new file name (a backup never overwrites)", p))
		return
	}
	if fi, err := os.Stat(filepath.Dir(p)); err != nil || !fi.IsDir() {
		fail(http.StatusBadRequest, fmt.Errorf("backup: the directory of %s does not exist", p))
		return
	}
	rep, err := d.st.Backup(r.Context(), p)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, store.ErrDiskFull) {
			code = http.StatusInsufficientStorage
		}
		fail(code, err)
		return
	}
	d.log.Info("store backed up", "path", rep.Path, "bytes", rep.Bytes, "jobs", rep.Jobs, "took", rep.Took)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(rep)
}
