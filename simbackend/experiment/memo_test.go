package experiment

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// warm: a second caller needing the same keys computes the ones nobody has
// claimed instead of waiting for the first caller's key; every key is
// computed once, and get then returns the values.
func TestMemoWarmSplitsTheKeys(t *testing.T) {
	var m memo[int, int]
	release := make(chan struct{})
	var calls [5]atomic.Int32
	f := func(k int) (int, error) {
		calls[k].Add(1)
		if k == 0 {
			<-release // the first caller is busy with key 0
		}
		return k * 10, nil
	}
	keys := []int{0, 1, 2, 3, 4}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.warm(keys, f) }()
	deadline := time.Now().Add(30 * time.Second)
	for calls[0].Load() == 0 { // wait until key 0 is claimed
		if time.Now().After(deadline) {
			t.Fatal("the first caller never started key 0")
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { m.warm(keys, f); close(done) }()
	select {
	case <-done: // keys 1-4 computed while key 0 is still running
	case <-time.After(30 * time.Second):
		t.Fatal("the second caller waited for key 0 instead of computing the others")
	}
	close(release)
	wg.Wait()
	for k := range keys {
		if n := calls[k].Load(); n != 1 {
			t.Errorf("key %d computed %d times, want once", k, n)
		}
		v, err := m.get(k, func() (int, error) { t.Errorf("key %d recomputed by get", k); return 0, nil })
		if err != nil || v != k*10 {
			t.Errorf("get(%d) = %d, %v; want %d", k, v, err, k*10)
		}
	}
}
