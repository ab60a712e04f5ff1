package policyrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/plugins"
	"github.com/gridsub/gridsub/policy"
	"github.com/gridsub/gridsub/policy/dependable"
	"github.com/gridsub/gridsub/policy/feasible"
	"github.com/gridsub/gridsub/policy/remap"
	"github.com/gridsub/gridsub/policy/reserve"
	"github.com/gridsub/gridsub/policy/trust"
)

// The cost of one call through the plugin seam, per kind: the built-in
// called directly, through the shims over a real gRPC connection in
// process (TestPluginGRPCConn: encoding, HTTP/2, decoding; no process
// switch), and, with GRIDSUB_BENCH_PROCESS=1, through a real plugin
// process (the gridsub binary's `plugin serve KIND NAME`, AutoMTLS over a
// Unix socket). The seam's added cost is a path's ns/op minus direct's.
//
//	go test -run '^$' -bench Seam -benchtime 2000x ./bridge/plugins/policyrpc
//	GRIDSUB_BENCH_PROCESS=1 go test -run '^$' -bench Seam ./bridge/plugins/policyrpc
//
// The inputs are one cycle's worth on a mid-sized grid: 10 sites with 20
// running jobs each, 200 queued jobs, 20 waiting dispatched jobs.

// benchGrid is a snapshot of sites sites, each with busy holds, and a
// queue of queued jobs.
func benchGrid(sites, busy, queued int) *policy.Snapshot {
	r := rand.New(rand.NewPCG(42, 43))
	s := &policy.Snapshot{Now: t0, MultiSite: 1.1}
	for i := range sites {
		st := policy.Site{Name: fmt.Sprintf("site%02d", i), Nodes: 256, H: 0.5 + r.Float64(), Trust: 0.5 + r.Float64()/2,
			Shape: policy.NodeShape{Cores: 32, MemBytes: 128 << 30}}
		used := 0
		for range busy {
			n := 1 + r.IntN(8)
			st.Busy = append(st.Busy, policy.Hold{Nodes: n, Until: t0.Add(time.Duration(1+r.IntN(7200)) * time.Second)})
			used += n
		}
		st.Free = st.Nodes - used
		s.Sites = append(s.Sites, st)
	}
	s.Links = make([][]policy.Link, sites)
	for i := range s.Links {
		s.Links[i] = make([]policy.Link, sites)
		for k := range s.Links[i] {
			if i != k {
				s.Links[i][k] = policy.Link{SecPerByte: 1e-8, Latency: 20 * time.Millisecond}
			}
		}
	}
	for k := range queued {
		s.Queue = append(s.Queue, policy.Job{ID: fmt.Sprintf("job%04d", k), Width: 1 + r.IntN(32), Estimate: time.Duration(60+r.IntN(7200)) * time.Second,
			Submit: t0.Add(-time.Duration(k) * time.Second), Origin: r.IntN(sites), DataSize: int64(r.IntN(1 << 30))})
	}
	return s
}

var (
	gridsubOnce sync.Once
	gridsubBin  string
	gridsubSum  string
	gridsubErr  error
)

// gridsubBinary builds cmd/gridsub once for the process benchmarks.
func gridsubBinary(b *testing.B) (string, string) {
	gridsubOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gsbench")
		if err != nil {
			gridsubErr = err
			return
		}
		gridsubBin = filepath.Join(dir, "gridsub")
		if out, err := exec.Command("go", "build", "-o", gridsubBin, "../../../cmd/gridsub").CombinedOutput(); err != nil {
			gridsubErr = fmt.Errorf("%v\n%s", err, out)
			return
		}
		data, err := os.ReadFile(gridsubBin)
		if err != nil {
			gridsubErr = err
			return
		}
		sum := sha256.Sum256(data)
		gridsubSum = hex.EncodeToString(sum[:])
	})
	if gridsubErr != nil {
		b.Fatal(gridsubErr)
	}
	return gridsubBin, gridsubSum
}

// paths returns the implementations to time for kind: direct, grpc and,
// when asked for, process.
func paths(b *testing.B, kind, name string, impl any) map[string]any {
	out := map[string]any{"direct": impl}
	raw, _ := Test(b, kind, impl)
	out["grpc"] = raw
	if os.Getenv("GRIDSUB_BENCH_PROCESS") == "1" {
		bin, sum := gridsubBinary(b)
		p, err := Load(context.Background(), kind, Config{Path: bin, Args: []string{"plugin", "serve", kind, name}, SHA256: sum})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		out["process"] = p.Policy()
	}
	return out
}

func eachPath(b *testing.B, kind, name string, impl any, f func(b *testing.B, x any)) {
	ps := paths(b, kind, name, impl)
	for _, path := range []string{"direct", "grpc", "process"} {
		x, ok := ps[path]
		if !ok {
			continue
		}
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			f(b, x)
		})
	}
}

func BenchmarkSeam(b *testing.B) {
	s := benchGrid(10, 20, 200)
	b.Run("feasibility", func(b *testing.B) {
		d := &policy.Demand{Width: 48, Estimate: time.Hour, DataSize: 1 << 28, Origin: "site01", Deadline: t0.Add(6 * time.Hour)}
		eachPath(b, plugins.KindFeasibility, feasible.Name, feasible.Check{}, func(b *testing.B, x any) {
			f := x.(policy.Feasibility)
			for b.Loop() {
				if _, err := f.Feasible(d, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("admission", func(b *testing.B) {
		var res []policy.ResvResource
		for _, st := range s.Sites {
			res = append(res, policy.ResvResource{Name: st.Name, Capacity: 4, Level: 2})
		}
		running := []policy.ResvRunning{{Resource: "site00", Job: "x", Nodes: 2, Expected: time.Hour, Elapsed: time.Minute}}
		q := policy.ResvRequest{ID: "q", ET: t0.Add(time.Hour), LT: t0.Add(3 * time.Hour), Dur: time.Hour, Width: 1, Demand: 1}
		eachPath(b, plugins.KindAdmission, reserve.DRRMName, reserve.DRRM{}, func(b *testing.B, x any) {
			book := x.(policy.Admission).NewBook(res, 1)
			for b.Loop() {
				if st := book.Admit(q, t0, running); st.Code != policy.Success {
					b.Fatal(st)
				}
				book.Remove(q.ID) // keeps the book as it was: one Admit and one Remove per op
			}
		})
	})
	b.Run("trust", func(b *testing.B) {
		in := &policy.TrustInput{Outcomes: map[policy.TrustKey]policy.Outcomes{}}
		for i, st := range s.Sites {
			in.Sites = append(in.Sites, policy.TrustNode{Name: st.Name, Power: float64(st.Nodes) / st.H, Bandwidth: 1e8})
			in.Outcomes[policy.TrustKey{To: st.Name}] = policy.Outcomes{Completed: float64(100 + i), Failed: float64(i), Unreachable: 1}
		}
		eachPath(b, plugins.KindTrust, trust.BuiltinName, trust.Policy{Model: trust.DefaultModel()}, func(b *testing.B, x any) {
			t := x.(policy.Trust)
			for b.Loop() {
				if _, err := t.Scores(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("tiering", func(b *testing.B) {
		in := &policy.CopyInput{Snapshot: s, Job: &s.Queue[3], Decision: policy.Decision{Job: s.Queue[3].ID, Action: policy.Start,
			Chosen: policy.Option{Parts: []policy.Part{{Site: 2, Nodes: s.Queue[3].Width}}}}}
		eachPath(b, plugins.KindTiering, dependable.TieringName, dependable.Tiering{}, func(b *testing.B, x any) {
			t := x.(policy.Tiering)
			for b.Loop() {
				if f, _ := t.Copies(in); len(f) == 0 {
					b.Fatal("no copy")
				}
			}
		})
	})
	b.Run("tiering-rc", func(b *testing.B) {
		// Copies with the sites' reliability costs.
		in := &policy.CopyInput{Snapshot: s, Job: &s.Queue[3], Decision: policy.Decision{Job: s.Queue[3].ID, Action: policy.Start,
			Chosen: policy.Option{Parts: []policy.Part{{Site: 2, Nodes: s.Queue[3].Width}}}}}
		for i := range s.Sites {
			in.RC = append(in.RC, float64(i%4)/10)
		}
		eachPath(b, plugins.KindTiering, dependable.TieringName, dependable.Tiering{}, func(b *testing.B, x any) {
			t := x.(policy.Tiering)
			for b.Loop() {
				if f, _ := t.Copies(in); len(f) == 0 {
					b.Fatal("no copy")
				}
			}
		})
	})
	b.Run("remap", func(b *testing.B) {
		in := &policy.RemapInput{Now: t0, Snapshot: s, MinGain: time.Minute}
		for i := range s.Sites {
			in.Free = append(in.Free, s.Sites[i].Free)
		}
		for k := range 20 {
			j := s.Queue[k]
			in.Waiting = append(in.Waiting, policy.Waiting{Job: j, Parts: []policy.Part{{Site: k % len(s.Sites), Nodes: j.Width}}})
		}
		eachPath(b, plugins.KindRemap, remap.Name, remap.Gain{}, func(b *testing.B, x any) {
			r := x.(policy.Remap)
			for b.Loop() {
				if _, err := r.Moves(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
