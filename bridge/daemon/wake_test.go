package daemon

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestPostSubmittedCoalesces: a burst of submissions wakes the cycle at
// once for the first and once more at the end of the interval for all
// the others, not once per job; a submission after a quiet interval
// wakes it at once again.
func TestPostSubmittedCoalesces(t *testing.T) {
	d := &Daemon{trig: make(chan string, 1), pending: map[string]*atomic.Bool{TaskCycle: new(atomic.Bool)}, m: newMetrics(nil)}
	var woken atomic.Int32
	done := make(chan struct{})
	defer close(done)
	go func() { // the worker: takes each wake-up as work() does
		for {
			select {
			case <-done:
				return
			case task := <-d.trig:
				d.pending[task].Store(false)
				woken.Add(1)
			}
		}
	}()
	waitWoken := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for woken.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("woken %d times, want %d", woken.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	first := time.Now()
	d.postSubmitted()
	waitWoken(1) // the first at once
	for range 100 {
		d.postSubmitted()
	}
	waitWoken(2) // the other 100: one more, at the end of the interval
	if el := time.Since(first); el < submitWakeEvery {
		t.Errorf("the second wake-up came %s after the first, within the interval (%s)", el, submitWakeEvery)
	}
	time.Sleep(3 * submitWakeEvery)
	if n := woken.Load(); n != 2 {
		t.Fatalf("101 submissions in one burst woke the cycle %d times, want 2", n)
	}
	d.postSubmitted() // after a quiet interval: at once
	waitWoken(3)
}
