package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/store"
)

// damage overwrites the middle page of the database file db with random
// bytes behind the daemon's back.
func damage(t *testing.T, db string) {
	t.Helper()
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(9, 9))
	page := make([]byte, 4096)
	for i := range page {
		page[i] = byte(rng.UintN(256))
	}
	if _, err := f.WriteAt(page, (fi.Size()/4096/2)*4096); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedStoreRefusesSubmissions: once the daemon's store has found
// damage at run time (health answers 503), a submission is refused with
// 503 and the reason, not accepted into a file the next start refuses.
func TestDamagedStoreRefusesSubmissions(t *testing.T) {
	state, sock := dirs(t)
	db := populate(t, state, 400)
	d := start(t, state, sock, 60)
	c := api.NewUnixClient(sock)
	if _, err := c.Submit(context.Background(), request("before", 1, time.Second, time.Minute)); err != nil {
		t.Fatalf("a submission into a sound store: %v", err)
	}
	damage(t, db)
	if err := d.Store().QuickCheck(context.Background()); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("QuickCheck after the damage = %v", err)
	}
	if code, _ := health(t, sock); code != http.StatusServiceUnavailable {
		t.Fatalf("health of a damaged store: %d, want 503", code)
	}
	body, _ := json.Marshal(request("after", 1, time.Second, time.Minute))
	resp, err := unixHTTP(sock).Post("http://gridsub/v1/jobs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || eb.Code != api.CodeUnavailable ||
		!strings.Contains(eb.Error, "damaged") || !strings.Contains(eb.Error, db) || !strings.Contains(eb.Error, "restore") {
		t.Fatalf("POST /v1/jobs into a damaged store: %d %+v, want 503 naming the file, the damage and the remedy", resp.StatusCode, eb)
	}
	for _, j := range d.Broker().Jobs() {
		if j.Req.Name == "after" {
			t.Fatalf("job %s accepted into a damaged store", j.ID)
		}
	}
	// The Go client reports it as the store's condition too.
	if _, err := c.Submit(context.Background(), request("after2", 1, time.Second, time.Minute)); err == nil {
		t.Fatal("the client's submission into a damaged store succeeded")
	}
}
