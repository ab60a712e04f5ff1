package bridge

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestPickID(t *testing.T) {
	if id, err := PickID("a-1", []string{"a-1", "a-10"}); err != nil || id != "a-1" {
		t.Errorf("exact among matches: %q %v", id, err)
	}
	if id, err := PickID("10", []string{"a-10"}); err != nil || id != "a-10" {
		t.Errorf("one match: %q %v", id, err)
	}
	if _, err := PickID("x", nil); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `no job matches "x"`) {
		t.Errorf("none: %v", err)
	}
	var many []string
	for i := range 7 {
		many = append(many, fmt.Sprintf("g-%d", i))
	}
	_, err := PickID("g", many)
	if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "matches g-0, g-1, g-2, g-3, g-4, ...") {
		t.Errorf("many: %v", err)
	}
	if _, err := PickID("", many); !errors.Is(err, ErrBadRequest) {
		t.Errorf("empty: %v", err)
	}
}

func TestParseState(t *testing.T) {
	for _, s := range States {
		if got, err := ParseState(" " + strings.ToUpper(string(s)) + " "); err != nil || got != s {
			t.Errorf("%s: %q %v", s, got, err)
		}
	}
	if _, err := ParseState("done"); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "valid: held, queued, reserved,") {
		t.Errorf("unknown: %v", err)
	}
	if len(States) != 11 {
		t.Errorf("States has %d entries; a new state must be added there", len(States))
	}
}
