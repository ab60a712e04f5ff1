package backendtest

import (
	"context"
	"errors"
	"testing"

	"github.com/gridsub/gridsub/backends"
)

// batch: for a backend with the batch capability, SubmitBatch answers one
// result per spec in order; a spec it refuses fails alone; each id is the
// job of its own spec (its tag, its exit code).
func (s *suite) batch(t *testing.T) {
	bs, ok := backends.AsBatchSubmitter(s.h.Backend)
	if !ok {
		t.Fatal("the batch capability is declared but SubmitBatch is not reachable")
	}
	specs := []*backends.JobSpec{s.spec(s.h.ShortRun, 0), s.spec(s.h.ShortRun, 0), s.spec(s.h.ShortRun, 3)}
	specs[1].Nodes = 0
	res := bs.SubmitBatch(context.Background(), specs)
	if len(res) != len(specs) {
		t.Fatalf("SubmitBatch: %d results for %d specs", len(res), len(specs))
	}
	if !errors.Is(res[1].Err, backends.ErrInvalidSpec) || res[1].ID != "" {
		t.Errorf("the invalid spec: %+v, want ErrInvalidSpec and no id", res[1])
	}
	for _, k := range []int{0, 2} {
		if res[k].Err != nil || res[k].ID == "" {
			t.Fatalf("spec %d: %+v, want an id", k, res[k])
		}
	}
	if res[0].ID == res[2].ID {
		t.Fatalf("two specs got the same id %s", res[0].ID)
	}
	for _, k := range []int{0, 2} {
		st := s.waitFinal(t, res[k].ID, s.h.JobTimeout)
		want := specs[k].Sim.ExitCode
		if st.ExitCode != want {
			t.Errorf("spec %d (%s): %+v, want exit code %d", k, res[k].ID, st, want)
		}
		if st.GridID != "" && st.GridID != specs[k].GridID {
			t.Errorf("spec %d: grid id %q, want %q", k, st.GridID, specs[k].GridID)
		}
	}
}
