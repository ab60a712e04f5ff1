package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// FuzzIdempotencyKey: any Idempotency-Key header (and the same key in the
// body, equal or not) is either refused 400 with an ErrorBody naming the
// key, or accepted as a key of 1 to 128 printable characters; the server
// never fails otherwise. (The key's index lives in the daemon: the broker
// here stores the key with the job.)
func FuzzIdempotencyKey(f *testing.F) {
	for _, k := range []string{"k", "0123456789abcdef0123456789abcdef", strings.Repeat("x", 128), strings.Repeat("x", 129),
		"a b", "\x00", "é", "key\r\nX-Other: 1", "\t"} {
		f.Add(k, false)
		f.Add(k, true)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, key string, inBody bool) {
		req := bridge.Request{Name: "k", Nodes: 1, Estimate: time.Hour, Command: []string{"/bin/true"}}
		if inBody {
			req.IdempotencyKey = key
		}
		body, _ := json.Marshal(req)
		r := httptest.NewRequest(http.MethodPost, "http://gridsub/v1/jobs", strings.NewReader(string(body)))
		r.Header[api.IdempotencyHeader] = []string{key}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		good := len(key) >= 1 && len(key) <= bridge.MaxIdempotencyKey && strings.IndexFunc(key, func(c rune) bool { return c < 0x21 || c > 0x7e }) < 0
		switch w.Code {
		case http.StatusCreated:
			var sr api.SubmitResponse
			if err := json.Unmarshal(w.Body.Bytes(), &sr); err != nil || (key != "" && sr.Job.Req.IdempotencyKey != key) {
				t.Fatalf("201 for key %q: %s", key, w.Body.String())
			}
			if key != "" && !good {
				t.Fatalf("a malformed key %q was accepted", key)
			}
		case http.StatusBadRequest:
			checkErrorBody(t, w, api.CodeBadRequest)
			if good {
				t.Fatalf("a well-formed key %q was refused: %s", key, w.Body.String())
			}
			if !strings.Contains(w.Body.String(), "IdempotencyKey") {
				t.Fatalf("the refusal of key %q does not name the key: %s", key, w.Body.String())
			}
		default:
			t.Fatalf("key %q: status %d %s", key, w.Code, w.Body.String())
		}
	})
}
