package sshbatch_test

import (
	"testing"

	"github.com/gridsub/gridsub/backends/sshbatch"
)

// TestZeroLink: a backend built on a caller's Runner has no connection of
// its own: no error, no estimate, nothing to close.
func TestZeroLink(t *testing.T) {
	var l sshbatch.Link
	if l.ConnErr() != nil || l.Close() != nil {
		t.Error("the zero Link reports an error")
	}
	if _, _, ok := l.LinkEstimate(); ok {
		t.Error("the zero Link has an estimate")
	}
}
