package bridge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gridsub/gridsub/backends"
)

// TestCopiesProperties drives tiered jobs on three fake sites through random
// starts, successes, failures and site outages, and checks after every
// cycle that
//   - replication never leaves a copy running once another copy of the
//     job has succeeded, at a site that answers — and has answered long
//     enough for a cancel retried once per DownAfter (10s here, cycles up
//     to 8s apart) to have reached it;
//   - a backup is never submitted, nor left running, once its primary has
//     succeeded;
//   - a job's tier never changes;
//   - a job ends at most once.
func TestCopiesProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fl := []*flaky{{fakeSite: newFake("A", 4)}, {fakeSite: newFake("B", 4)}, {fakeSite: newFake("C", 4)}}
		b := tierBroker(t, nil, fl[0], fl[1], fl[2])
		ctx := context.Background()
		tiers := map[string]string{}
		now := t0
		// succeeded[tag]: the cycle at which the test made that remote job succeed.
		succeeded := map[string]int{}
		lastDown := map[int]time.Time{}
		knownAt := map[string]int{}     // tag -> the step at whose cycle the broker knew of its success
		submittedAt := map[string]int{} // tag -> cycle it first appeared at a site
		nJobs := rapid.IntRange(1, 5).Draw(rt, "jobs")
		for i := 0; i < nJobs; i++ {
			r := qreq(rapid.SampledFrom([]string{"high", "low", "none", ""}).Draw(rt, "qos"))
			if rapid.Bool().Draw(rt, "deadline") {
				r.Deadline = now.Add(time.Duration(rapid.IntRange(61, 400).Draw(rt, "dl")) * time.Second)
			}
			j, err := b.Submit(ctx, r, now)
			if err != nil {
				rt.Fatal(err)
			}
			tiers[j.ID] = j.Tier
		}
		steps := rapid.IntRange(5, 30).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			// Random changes at the sites.
			for si, f := range fl {
				if rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("down%d", si)) == 0 {
					f.down.Store(!f.down.Load())
				}
				f.mu.Lock()
				var tags []string
				for _, st := range f.jobs {
					if !st.State.Final() {
						tags = append(tags, st.GridID)
					}
				}
				f.mu.Unlock()
				for _, tag := range sortedStrings(tags) {
					switch rapid.IntRange(0, 5).Draw(rt, "change") {
					case 1:
						f.setTag(tag, backends.StateRunning, 0)
					case 2:
						f.setTag(tag, backends.StateCompleted, 0)
						if _, ok := succeeded[tag]; !ok {
							succeeded[tag] = step
						}
					case 3:
						f.setTag(tag, backends.StateFailed, 1)
					}
				}
			}
			for si, f := range fl {
				if f.down.Load() {
					lastDown[si] = now
				}
			}
			now = now.Add(time.Duration(rapid.IntRange(1, 8).Draw(rt, "dt")) * time.Second)
			if _, err := b.Cycle(ctx, now); err != nil {
				rt.Fatal(err)
			}
			b.duties.bg.Wait() // background cancel retries (sites last seen down)
			for _, f := range fl {
				f.mu.Lock()
				for _, st := range f.jobs {
					if _, ok := submittedAt[st.GridID]; !ok {
						submittedAt[st.GridID] = step
					}
				}
				f.mu.Unlock()
			}
			for id, tier := range tiers {
				j, err := b.Job(id)
				if err != nil {
					rt.Fatal(err)
				}
				if j.Tier != tier {
					rt.Fatalf("job %s: tier changed from %s to %s", id, tier, j.Tier)
				}
				ends := 0
				for _, e := range j.Events {
					if e.Kind == "completed" || e.Kind == "failed" {
						ends++
					}
				}
				if ends > 1 {
					rt.Fatalf("job %s ended %d times: %s", id, ends, kinds(j))
				}
				if tier != TierHigh && tier != TierLow {
					continue
				}
				// Copies whose success the broker has seen.
				for _, c := range append(append([]Component(nil), j.Comps...), j.Withdrawn...) {
					if _, ok := knownAt[c.Tag]; !ok && c.Tag != "" && c.State == backends.StateCompleted {
						knownAt[c.Tag] = step
					}
				}
				for tag, at := range knownAt {
					if !strings.HasPrefix(tag, id+"-a") {
						continue
					}
					attempt := strings.TrimPrefix(tag, id+"-")
					attempt, _, _ = strings.Cut(attempt, "-c")
					for si, f := range fl {
						if d, ok := lastDown[si]; f.down.Load() || (ok && now.Sub(d) < 18*time.Second) {
							continue // a cancel cannot reach it now; retried when it answers
						}
						f.mu.Lock()
						for _, st := range f.jobs {
							other := strings.HasPrefix(st.GridID, id+"-"+attempt) && st.GridID != tag
							if other && !st.State.Final() {
								f.mu.Unlock()
								rt.Fatalf("job %s (%s): %s still %s at %s after %s succeeded at step %d (now %d): %s",
									id, tier, st.GridID, st.State, f.name, tag, at, step, kinds(j))
							}
							if other && tier == TierLow && !strings.HasSuffix(tag, "-c1") && submittedAt[st.GridID] > at {
								f.mu.Unlock()
								rt.Fatalf("job %s: backup %s submitted at step %d after its primary %s succeeded at step %d",
									id, st.GridID, submittedAt[st.GridID], tag, at)
							}
						}
						f.mu.Unlock()
					}
				}
			}
		}
	})
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for k := i; k > 0 && out[k] < out[k-1]; k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out
}
