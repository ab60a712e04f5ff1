package dependable

import (
	"encoding/json"
	"sync"
	"testing"
	"time"
)

func TestLiveAdapter(t *testing.T) {
	p, _ := NewPredictor(Config{Threshold: time.Minute})
	now := epoch
	l := NewLive(p, func() time.Time { return now })
	l.Observe("A", true, epoch)
	l.Observe("A", false, epoch.Add(time.Hour)) // TTF 1 h
	l.Observe("A", true, epoch.Add(2*time.Hour))
	l.Observe("A", false, epoch.Add(time.Minute)) // older: dropped
	now = epoch.Add(2*time.Hour + 10*time.Minute)
	// Up for 10 min, one state of 60 min: 40 min fit (r 1), 55 do not (r 0).
	if rc := l.RC("A", 40*time.Minute); rc != 0 {
		t.Errorf("RC(40m) = %v, want 0", rc)
	}
	if rc := l.RC("A", 55*time.Minute); rc != (55 * time.Minute).Seconds() {
		t.Errorf("RC(55m) = %v, want %v", rc, (55 * time.Minute).Seconds())
	}
	if v := l.Sites(); len(v) != 1 || v[0].Failures != 1 {
		t.Fatalf("sites %+v", v)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back Predictor
	if err := json.Unmarshal(b, &back); err != nil || back.Reliability("A", now, 40*time.Minute) != 1 {
		t.Fatalf("restored: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 100 {
				l.Observe("B", k%2 == 0, epoch.Add(time.Duration(i*1000+k)*time.Second))
				l.RC("B", time.Minute)
			}
		}()
	}
	wg.Wait()
}

// TestLiveLost: a lost job ends an uptime without taking the site down,
// counts as a learned failure, and moves Changed; an out-of-order report
// does not.
func TestLiveLost(t *testing.T) {
	p, _ := NewPredictor(Config{Threshold: time.Minute})
	now := epoch.Add(3 * time.Hour)
	l := NewLive(p, func() time.Time { return now })
	l.Observe("A", true, epoch)
	l.Lost("A", epoch.Add(2*time.Hour)) // TTF 2 h, up again at once
	g := l.Changed()
	l.Lost("A", epoch.Add(time.Hour))                // older: dropped
	l.Observe("A", true, epoch.Add(150*time.Minute)) // confirms: no change
	if l.Changed() != g || g != 2 {
		t.Fatalf("Changed %d after a dropped and a confirming report, %d before; want 2 both", l.Changed(), g)
	}
	v := l.Sites()
	if len(v) != 1 || !v[0].Up || v[0].Failures != 1 || v[0].MTTF != 2*time.Hour {
		t.Fatalf("sites %+v, want A up with one failure of 2h", v)
	}
	// Up for 1 h of a 2 h state: 30 min more fits, 90 min does not.
	if r := l.Reliability("A", 30*time.Minute); r != 1 {
		t.Errorf("r(30m) = %v, want 1", r)
	}
	if r := l.Reliability("A", 90*time.Minute); r != 0 {
		t.Errorf("r(90m) = %v, want 0", r)
	}
}
