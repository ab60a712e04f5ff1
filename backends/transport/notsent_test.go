package transport

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestNotSent: Run says ErrNotSent exactly when the command never left:
// no session slot before the deadline, or the client closed; a command cut
// while it runs is not "not sent" (it may have done its work).
func TestNotSent(t *testing.T) {
	f := newFixture(t)
	f.srv.MaxSessions.Store(1)
	c := f.dial(t)
	long, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(long, []string{"sleep", "30"}, nil)
		done <- err
	}()
	waitFor(t, 5*time.Second, "the long command to hold the only session", func() bool { return f.srv.MaxActive.Load() == 1 })
	if _, err := c.Run(ctxTimeout(t, 300*time.Millisecond), []string{"true"}, nil); !errors.Is(err, ErrNotSent) {
		t.Errorf("no session before the deadline: %v, want ErrNotSent", err)
	}
	cancel()
	if err := <-done; err == nil || errors.Is(err, ErrNotSent) {
		t.Errorf("a command cut while running: %v, want an error that is not ErrNotSent", err)
	}
	c.Close()
	if _, err := c.Run(context.Background(), []string{"true"}, nil); !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrNotSent and ErrClosed", err)
	}
}
