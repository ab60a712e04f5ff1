package registry

import (
	"errors"
	"strings"
	"testing"
)

func TestByName(t *testing.T) {
	for _, n := range Names() {
		p, err := ByName(" " + strings.ToUpper(n) + " ")
		if err != nil || p.Name() != n {
			t.Fatalf("%s: %v, %v", n, p, err)
		}
	}
	_, err := ByName("benfit")
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "benefit") || !strings.Contains(err.Error(), "greedy-easy") {
		t.Fatalf("unknown name: %v", err)
	}
}
