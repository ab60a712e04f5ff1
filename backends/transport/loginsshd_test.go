package transport

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// countingPrompter answers from a function and counts what it was asked.
type countingPrompter struct {
	mu     sync.Mutex
	asked  []Challenge
	answer func(Challenge) ([]string, error)
}

func (p *countingPrompter) Prompt(_ context.Context, c Challenge) ([]string, error) {
	p.mu.Lock()
	p.asked = append(p.asked, c)
	p.mu.Unlock()
	return p.answer(c)
}

func (p *countingPrompter) count(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.asked {
		if c.Kind == kind {
			n++
		}
	}
	return n
}

func testLogger(t testing.TB, buf *syncBuffer) *slog.Logger {
	if buf != nil {
		return slog.New(slog.NewTextHandler(buf, nil))
	}
	return slog.New(slog.NewTextHandler(testWriter{t.(*testing.T)}, nil))
}
