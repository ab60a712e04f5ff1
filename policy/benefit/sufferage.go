package benefit

import "slices"

// unclaim takes back task o's claim; it reports whether o held one.
func (mp *mapper) unclaim(o int, machineHolder, repoHolder []int) bool {
	c := mp.ts[o].best
	held := false
	if machineHolder[c.m] == o {
		machineHolder[c.m] = -1
		held = true
	}
	if r := mp.repoOf(o, c); r >= 0 && repoHolder[r] == o {
		repoHolder[r] = -1
		held = true
	}
	return held
}

// sufferage is the classic Sufferage heuristic: every round, each task in
// order claims its best machine; a claimed machine goes to the task with
// the higher sufferage (second-best minus best completion), the other waits
// for the next round. Deadline drops as in minFirst.
func (mp *mapper) sufferage() {
	pool := make([]int, 0, len(mp.p.Tasks))
	for i := range mp.p.Tasks {
		if mp.ts[i].best.m >= 0 {
			pool = append(pool, i)
		}
	}
	machineHolder := make([]int, len(mp.nodes))
	repoHolder := make([]int, len(mp.repos))
	var claims []int
	for round := 0; len(pool) > 0; round++ {
		for k := range machineHolder {
			machineHolder[k] = -1
		}
		for k := range repoHolder {
			repoHolder[k] = -1
		}
		claims = claims[:0]
		for _, i := range pool {
			if mp.missed(i) {
				mp.drop(i, round)
				continue
			}
			c := mp.ts[i].best
			r := mp.repoOf(i, c)
			hm, hr := machineHolder[c.m], -1
			if r >= 0 {
				hr = repoHolder[r]
			}
			s := mp.ts[i].suff
			if (hm >= 0 && mp.ts[hm].suff >= s) || (hr >= 0 && mp.ts[hr].suff >= s) {
				continue
			}
			for _, o := range []int{hm, hr} {
				if o >= 0 && mp.unclaim(o, machineHolder, repoHolder) {
					claims = slices.DeleteFunc(claims, func(x int) bool { return x == o })
				}
			}
			machineHolder[c.m] = i
			if r >= 0 {
				repoHolder[r] = i
			}
			claims = append(claims, i)
		}
		for _, i := range claims {
			mp.commit(i, round)
		}
		pool = slices.DeleteFunc(pool, func(i int) bool { return mp.ts[i].done })
		for _, i := range pool {
			if !mp.fresh(i) {
				mp.scan(i)
			}
		}
	}
}
