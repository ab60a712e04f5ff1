package wire_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	pb "github.com/gridsub/gridsub/bridge/plugins/proto/v1"
	"github.com/gridsub/gridsub/bridge/plugins/wire"
	"github.com/gridsub/gridsub/policy"
)

// TestEveryPolicySentinelHasAKind: a sentinel added to policy's var blocks
// without a row in PolicyCodec would lose its identity across a policy
// plugin boundary.
func TestEveryPolicySentinelHasAKind(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..", "..")
	have := map[string]bool{}
	for _, r := range wire.PolicyCodec.Rows() {
		have[r.Qualified] = true
	}
	files, err := filepath.Glob(filepath.Join(root, "policy", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, n := range sentinelNames(t, f) {
			seen++
			if !have["policy."+n] {
				t.Errorf("policy.%s (%s) has no row in wire.PolicyCodec: add a kind (and the enum value in proto/v1/policy_common.proto)", n, filepath.Base(f))
			}
		}
	}
	if seen < 4 {
		t.Fatalf("found only %d sentinels in policy/*.go; have the var blocks moved?", seen)
	}
}

// TestPolicyKindsMatchTheEnum: the codec's numbers and names are the
// protobuf enum's.
func TestPolicyKindsMatchTheEnum(t *testing.T) {
	rows := wire.PolicyCodec.Rows()
	if len(pb.PolicyErrorKind_name) != len(rows)+1 {
		t.Errorf("the enum has %d values, the codec %d kinds (+ UNSPECIFIED)", len(pb.PolicyErrorKind_name), len(rows))
	}
	for _, r := range rows {
		if got := pb.PolicyErrorKind_name[int32(r.Kind)]; got != "POLICY_ERROR_KIND_"+r.Name {
			t.Errorf("kind %d is %s in the enum, %s in the codec", r.Kind, got, r.Name)
		}
	}
}

// TestPolicyCodecRoundTrip: every sentinel, wrapped and joined with
// another, comes back matching itself (and the other).
func TestPolicyCodecRoundTrip(t *testing.T) {
	c := wire.PolicyCodec
	for _, r := range c.Rows() {
		if r.Sentinel == nil {
			continue
		}
		err := fmt.Errorf("deep: %w", errors.Join(fmt.Errorf("wrapped: %w", r.Sentinel), context.Canceled))
		back := c.Decode("p", "M", c.KindsOf(err), err.Error())
		if !errors.Is(back, r.Sentinel) || !errors.Is(back, context.Canceled) {
			t.Errorf("%s: %v came back as %v (kinds %v)", r.Name, err, back, c.KindsOf(err))
		}
		if errors.Is(back, policy.ErrResvBound) != errors.Is(err, policy.ErrResvBound) {
			t.Errorf("%s: gained or lost ErrResvBound", r.Name)
		}
	}
	if ks := c.KindsOf(errors.New("x")); len(ks) != 1 || ks[0] != wire.PolicyInternal {
		t.Errorf("plain error: %v", ks)
	}
	if c.Decode("p", "M", nil, "") != nil {
		t.Error("nothing decodes to an error")
	}
}
