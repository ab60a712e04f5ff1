package backendtest

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// mustFetcher returns b as a Fetcher or fails the test.
func mustFetcher(t *testing.T, b backends.Backend) backends.Fetcher {
	t.Helper()
	f, ok := backends.AsFetcher(b)
	if !ok {
		t.Fatal("harness says Staging but the backend is not a Fetcher")
	}
	return f
}
