package experiment

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Bar reports an experiment's progress on a writer (stderr): runs done out
// of the total, elapsed time and an estimate of the time left. On a
// terminal it redraws one line in place; elsewhere it prints a plain line
// each time a run finishes, and at most every 30 s in between. Its Update
// method is a Progress.
type Bar struct {
	w     io.Writer
	tty   bool
	label string
	now   func() time.Time

	mu       sync.Mutex
	start    time.Time
	drawn    time.Time
	lastDone int
	width    int // of the last line drawn on a terminal
}

// NewBar returns a progress bar writing to w; tty says whether w is a
// terminal.
func NewBar(w io.Writer, tty bool, label string) *Bar {
	b := &Bar{w: w, tty: tty, label: label, now: time.Now, lastDone: -1}
	b.start = b.now()
	return b
}

// plainEvery is how often a plain (non-terminal) bar prints a line while no
// run finishes, so that a log shows the experiment is alive.
const plainEvery = 30 * time.Second

// Update is a Progress.
func (b *Bar) Update(done, total int, fraction float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.tty {
		if done == b.lastDone && now.Sub(b.drawn) < 200*time.Millisecond {
			return
		}
		line := b.line(done, total, fraction, now)
		pad := max(0, b.width-len(line))
		fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", pad))
		b.width = len(line)
	} else {
		if done == b.lastDone && now.Sub(b.drawn) < plainEvery {
			return
		}
		fmt.Fprintln(b.w, b.line(done, total, fraction, now))
	}
	b.drawn, b.lastDone = now, done
}

// Finish ends the bar's line on a terminal.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty && b.width > 0 {
		fmt.Fprintln(b.w)
		b.width = 0
	}
}

func (b *Bar) line(done, total int, fraction float64, now time.Time) string {
	const cells = 24
	fraction = min(max(fraction, float64(done)/float64(max(total, 1))), 1)
	filled := int(fraction * cells)
	elapsed := now.Sub(b.start)
	eta := "?"
	if fraction > 0.01 {
		eta = roundDur(time.Duration(float64(elapsed) * (1 - fraction) / fraction)).String()
	}
	if done == total {
		eta = "0s"
	}
	return fmt.Sprintf("%s [%s%s] %d/%d runs %3.0f%%  elapsed %s  ETA %s", b.label,
		strings.Repeat("#", filled), strings.Repeat(".", cells-filled), done, total, 100*fraction, roundDur(elapsed), eta)
}

func roundDur(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
