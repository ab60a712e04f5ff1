package dependable

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzPredictorJSON: a stored predictor is input (the store's file). Any
// bytes either are refused with ErrBadState and leave the predictor as it
// was, or give a predictor whose reliabilities lie in [0, 1] and which
// writes itself out and reads itself back unchanged.
func FuzzPredictorJSON(f *testing.F) {
	p, _ := NewPredictor(Config{Threshold: time.Minute, MaxStates: 4})
	p.Observe("A", Up, epoch)
	for i := 1; i < 8; i++ {
		p.Observe("A", Fail, epoch.Add(time.Duration(i*i)*time.Hour))
	}
	p.Observe("B", Down, epoch)
	good, _ := json.Marshal(p)
	f.Add(good)
	f.Add([]byte(`{"version":1,"threshold_ns":1,"max_states":1,"sites":{"x":{"ttf_ns":[0],"visits":[1],"trans":[[0]],"current":0,"up":true}}}`))
	f.Add([]byte(`{"version":1,"threshold_ns":60000000000,"max_states":2,"sites":{}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		q, _ := NewPredictor(Config{})
		before, _ := json.Marshal(q)
		if err := q.UnmarshalJSON(data); err != nil {
			if !errors.Is(err, ErrBadState) {
				t.Fatalf("error %v does not wrap ErrBadState", err)
			}
			if after, _ := json.Marshal(q); !bytes.Equal(before, after) {
				t.Fatal("a refused state changed the predictor")
			}
			return
		}
		for _, v := range q.Sites() {
			for _, at := range []time.Time{v.Since, v.Since.Add(time.Hour), epoch} {
				for _, d := range []time.Duration{0, time.Minute, 1000 * time.Hour} {
					if r := q.Reliability(v.Site, at, d); !(r >= 0 && r <= 1) {
						t.Fatalf("site %s: r = %v", v.Site, r)
					}
				}
			}
		}
		out, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		var back Predictor
		if err := back.UnmarshalJSON(out); err != nil {
			t.Fatalf("own output refused: %v\n%s", err, out)
		}
		again, _ := json.Marshal(&back)
		if !bytes.Equal(out, again) {
			t.Fatalf("round trip changed the state:\n%s\n%s", out, again)
		}
	})
}
