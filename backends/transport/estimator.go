package transport

import (
	"math"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Estimator estimates a site's transfer cost as seconds = latency +
// secPerByte * bytes from the transfers it observes.
//
// Method: exponentially weighted least squares. Every observation (x =
// bytes, y = seconds) is added to weighted sums after all earlier weights
// are multiplied by lambda = 1 - 1/window, so the fit follows a site whose
// bandwidth changes and an observation's weight halves after about
// 0.69*window newer ones. The line is fitted to these sums. When the sizes
// observed barely differ (the intercept cannot be told from the slope), or
// the fit is not physical (slope <= 0 or intercept < 0), the estimate falls
// back to a line through the origin (latency 0, secPerByte = weighted
// sum(xy)/sum(xx)). With no observation both are 0.
//
// An Estimator is safe for concurrent use.
type Estimator struct {
	mu                   sync.Mutex
	lambda               float64
	n                    int
	s0, sx, sy, sxx, sxy float64
	latency, secPerByte  float64
}

// DefaultEstimatorWindow is the effective number of observations an
// Estimator remembers when NewEstimator is given 0.
const DefaultEstimatorWindow = 32

// NewEstimator returns an empty Estimator remembering about window
// observations (0 means DefaultEstimatorWindow; 1 keeps only the last).
func NewEstimator(window int) *Estimator {
	if window <= 0 {
		window = DefaultEstimatorWindow
	}
	return &Estimator{lambda: 1 - 1/float64(window)}
}

// Observe adds one transfer. Transfers of 0 bytes or 0 duration carry no
// bandwidth information about bytes but still count for latency.
func (e *Estimator) Observe(t backends.Transfer) {
	x, y := float64(t.Bytes), t.Duration.Seconds()
	if x < 0 || y < 0 || math.IsNaN(y) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.lambda
	e.s0 = l*e.s0 + 1
	e.sx = l*e.sx + x
	e.sy = l*e.sy + y
	e.sxx = l*e.sxx + x*x
	e.sxy = l*e.sxy + x*y
	e.n++
	e.fit()
}

func (e *Estimator) fit() {
	mx, my := e.sx/e.s0, e.sy/e.s0
	vxx := e.sxx/e.s0 - mx*mx
	cxy := e.sxy/e.s0 - mx*my
	// Sizes must spread by more than 1% of their mean to separate the two.
	if vxx > 1e-4*mx*mx && vxx > 0 {
		b := cxy / vxx
		a := my - b*mx
		if b > 0 && a >= 0 {
			e.secPerByte, e.latency = b, a
			return
		}
	}
	if e.sxx > 0 {
		e.secPerByte, e.latency = e.sxy/e.sxx, 0
		return
	}
	// Only empty transfers so far: all of their time is latency.
	e.secPerByte, e.latency = 0, my
}

// SecPerByte is the estimated marginal cost of one byte in seconds.
func (e *Estimator) SecPerByte() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.secPerByte
}

// Latency is the estimated fixed cost of one transfer (open, rename,
// round trips).
func (e *Estimator) Latency() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Duration(e.latency * float64(time.Second))
}

// BytesPerSec is 1/SecPerByte, or 0 when nothing is known.
func (e *Estimator) BytesPerSec() float64 {
	spb := e.SecPerByte()
	if spb <= 0 {
		return 0
	}
	return 1 / spb
}

// Estimate is the predicted duration of a transfer of n bytes.
func (e *Estimator) Estimate(n int64) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Duration((e.latency + e.secPerByte*float64(n)) * float64(time.Second))
}

// Count is the number of transfers observed.
func (e *Estimator) Count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}
