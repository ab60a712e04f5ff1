package backendrpc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// batchMock is a mock with the batch capability.
type batchMock struct {
	*mock
	batch func(context.Context, []*backends.JobSpec) []backends.SubmitResult
}

func (b *batchMock) SubmitBatch(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	return b.batch(ctx, specs)
}

// TestSubmitBatchThroughPlugin: the capability is declared and the call
// crosses the boundary in one RPC, every job's result in its place with
// its error's identity (refused, unknown outcome, not sent) intact.
func TestSubmitBatchThroughPlugin(t *testing.T) {
	calls := 0
	perJob := []error{
		nil,
		fmt.Errorf("%w: sbatch: invalid partition", backends.ErrRejected),
		fmt.Errorf("%w: %w: batch cut", backends.ErrUnavailable, backends.ErrOutcomeUnknown),
		fmt.Errorf("%w: %w: no session", backends.ErrUnavailable, transport.ErrNotSent),
	}
	m := &batchMock{mock: &mock{name: "b"}, batch: func(_ context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
		calls++
		out := make([]backends.SubmitResult, len(specs))
		for i, sp := range specs {
			if err := perJob[i]; err != nil {
				out[i].Err = err
			} else {
				out[i].ID = backends.JobID("id-" + sp.GridID)
			}
		}
		return out
	}}
	c, _ := plugins.TestBackendValue(t, m)
	bs, ok := backends.AsBatchSubmitter(c)
	if !ok || !backends.CapabilitiesOf(c).Batch {
		t.Fatal("the batch capability is not declared through the plugin")
	}
	var specs []*backends.JobSpec
	for i := range perJob {
		specs = append(specs, &backends.JobSpec{GridID: fmt.Sprint("g", i), Nodes: 1, Command: []string{"true"}, Walltime: time.Minute})
	}
	res := bs.SubmitBatch(context.Background(), specs)
	if calls != 1 || len(res) != len(specs) {
		t.Fatalf("%d calls, %d results", calls, len(res))
	}
	if res[0].ID != "id-g0" || res[0].Err != nil {
		t.Errorf("job 0: %+v", res[0])
	}
	for i := 1; i < len(perJob); i++ {
		if res[i].ID != "" || res[i].Err == nil {
			t.Errorf("job %d: %+v, want its error", i, res[i])
			continue
		}
		for _, s := range allSentinels() {
			if errors.Is(res[i].Err, s) != errors.Is(perJob[i], s) {
				t.Errorf("job %d: errors.Is(%v) = %v through the plugin, %v in process", i, s, errors.Is(res[i].Err, s), errors.Is(perJob[i], s))
			}
		}
	}
	// A backend that breaks the contract (wrong count): every job's
	// outcome is unknown.
	m.batch = func(context.Context, []*backends.JobSpec) []backends.SubmitResult { return nil }
	for i, r := range bs.SubmitBatch(context.Background(), specs) {
		if !backends.OutcomeUnknown(r.Err) {
			t.Errorf("job %d of a broken batch: %v, want outcome unknown", i, r.Err)
		}
	}
}

// arrayMock is a batch mock that also submits native arrays when native.
type arrayMock struct {
	*batchMock
	native bool
	arrays int
}

func (a *arrayMock) SubmitArrays(ctx context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
	a.arrays++
	out := make([]backends.SubmitResult, len(specs))
	for i := range specs {
		out[i].ID = backends.JobID(fmt.Sprint("7.", i+1))
	}
	return out
}

func (a *arrayMock) NativeArrays() bool { return a.native }

// TestSubmitBatchPrefersNativeArrays: a plugin whose backend submits
// native arrays (backends.ArraySubmitter, opted in) answers the host's
// SubmitBatch with SubmitArrays — the elements of a grid array in the
// batch go as one array job — and with SubmitBatch when it did not opt in.
func TestSubmitBatchPrefersNativeArrays(t *testing.T) {
	batches := 0
	m := &arrayMock{batchMock: &batchMock{mock: &mock{name: "a"}, batch: func(_ context.Context, specs []*backends.JobSpec) []backends.SubmitResult {
		batches++
		out := make([]backends.SubmitResult, len(specs))
		for i := range specs {
			out[i].ID = backends.JobID(fmt.Sprint(100 + i))
		}
		return out
	}}, native: true}
	c, _ := plugins.TestBackendValue(t, m)
	bs, ok := backends.AsBatchSubmitter(c)
	if !ok {
		t.Fatal("the batch capability is not declared through the plugin")
	}
	specs := []*backends.JobSpec{
		{GridID: backends.ElementTag("p", 0, 1), Nodes: 1, Command: []string{"true"}, Walltime: time.Minute},
		{GridID: backends.ElementTag("p", 1, 1), Nodes: 1, Command: []string{"true"}, Walltime: time.Minute},
	}
	res := bs.SubmitBatch(context.Background(), specs)
	if m.arrays != 1 || batches != 0 || res[0].ID != "7.1" || res[1].ID != "7.2" {
		t.Fatalf("native on: %d SubmitArrays, %d SubmitBatch, %+v", m.arrays, batches, res)
	}
	m.native = false
	res = bs.SubmitBatch(context.Background(), specs)
	if m.arrays != 1 || batches != 1 || res[0].ID != "100" {
		t.Fatalf("native off: %d SubmitArrays, %d SubmitBatch, %+v", m.arrays, batches, res)
	}
}
