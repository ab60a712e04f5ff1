package simbackend_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/simbackend"
	"github.com/gridsub/gridsub/simbackend/swf"
)

// Two sites on one virtual clock, a job on each, run as fast as possible.
func ExampleNewSite() {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := simbackend.NewEngine(epoch, 42)
	onChange := func(st backends.JobStatus) {
		fmt.Printf("%s %s job %s %s\n", e.Now().Sub(epoch), st.GridID, st.ID, st.State)
	}
	beijing, _ := simbackend.NewSite(e, simbackend.SiteConfig{Name: "beijing", Nodes: 128, H: 1.4, OnChange: onChange})
	harbin, _ := simbackend.NewSite(e, simbackend.SiteConfig{Name: "harbin", Nodes: 32, H: 0.6, OnChange: onChange})
	ctx := context.Background()
	job := func(grid string, nodes int, run time.Duration) *backends.JobSpec {
		return &backends.JobSpec{GridID: grid, Command: []string{"./a.out"}, Nodes: nodes,
			Walltime: time.Hour, Sim: backends.SimHints{Runtime: run}}
	}
	beijing.Submit(ctx, job("g1", 100, 90*time.Second))
	e.After(30*time.Second, func() { harbin.Submit(ctx, job("g2", 32, time.Minute)) })
	e.Run()
	// Output:
	// 0s g1 job 1 pending
	// 0s g1 job 1 running
	// 30s g2 job 1 pending
	// 30s g2 job 1 running
	// 1m30s g1 job 1 completed
	// 1m30s g2 job 1 completed
}

// A single-site replay of an SWF trace under EASY backfilling.
func ExampleReplayEASY() {
	trace := `; MaxProcs: 4
1 0 -1 100 3 -1 -1 3 100 -1 1 1 -1 -1 -1 -1 -1 -1
2 1 -1 50 2 -1 -1 2 50 -1 1 1 -1 -1 -1 -1 -1 -1
3 2 -1 60 1 -1 -1 1 60 -1 1 1 -1 -1 -1 -1 -1 -1
`
	res, err := simbackend.ReplayEASY(context.Background(), strings.NewReader(trace), 4, simbackend.ReplayOptions{
		EASY:   simbackend.EASYOptions{ReferenceCompatible: true},
		Filter: swf.StrongFilter{MaxProcs: 4}.Apply,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, j := range res.Jobs {
		fmt.Printf("job %d: submit %d start %d end %d\n", j.ID, j.Submit, j.Start, j.End)
	}
	fmt.Printf("mean wait %.1f s, mean bsld %.2f\n", res.Summary.MeanWait, res.Summary.MeanBSLD)
	// Output:
	// job 1: submit 0 start 0 end 100
	// job 2: submit 1 start 100 end 150
	// job 3: submit 2 start 2 end 62
	// mean wait 33.0 s, mean bsld 1.66
}
