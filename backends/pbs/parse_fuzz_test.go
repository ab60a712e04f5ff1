package pbs

import (
	"errors"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
)

// seedFixtures adds every captured output in testdata/ (both variants) as
// a seed of f.
func seedFixtures(f *testing.F) {
	f.Helper()
	sshbatchtest.SeedFiles(f, 100, "testdata/*", "testdata/release/*")
}

// badOrNil: a parser's error on garbage is ErrBadOutput (never another
// kind, never a panic).
func badOrNil(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, backends.ErrBadOutput) {
		t.Fatalf("%s: error %v is not ErrBadOutput", what, err)
	}
}

// FuzzPBSOutput feeds every PBS output parser the same bytes: each either
// refuses them with ErrBadOutput or returns records whose ids are valid
// PBS ids, and a job record's Status either maps or says why.
func FuzzPBSOutput(f *testing.F) {
	seedFixtures(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		if id, err := ParseQsub(out); err == nil {
			if !validJobID(string(id)) {
				t.Fatalf("ParseQsub accepted id %q", id)
			}
		} else {
			badOrNil(t, "ParseQsub", err)
		}
		recs, err := ParseDSV(out)
		badOrNil(t, "ParseDSV", err)
		more, err := ParseJobsJSON(out)
		badOrNil(t, "ParseJobsJSON", err)
		for _, r := range append(recs, more...) {
			if !validJobID(string(r.ID)) {
				t.Fatalf("a record with id %q", r.ID)
			}
			if st, err := r.Status(time.UTC); err == nil {
				if st.State == backends.StateUnknown {
					t.Fatalf("job %s: Status gave no state and no error", r.ID)
				}
			} else {
				badOrNil(t, "Status", err)
			}
		}
		_, err = ParsePbsnodes(out)
		badOrNil(t, "ParsePbsnodes", err)
		_, err = ParseServer(out)
		badOrNil(t, "ParseServer", err)
		_, err = ParseQueues(out)
		badOrNil(t, "ParseQueues", err)
		_, _, err = ParseRsub(out)
		badOrNil(t, "ParseRsub", err)
		_, err = ParseRstat(out)
		badOrNil(t, "ParseRstat", err)
		if n := ResvNodes(string(out)); n < 0 {
			t.Fatalf("ResvNodes %d", n)
		}
		_ = UnknownJobIDs(out)
		_ = ParseVariableList(string(out))
	})
}
