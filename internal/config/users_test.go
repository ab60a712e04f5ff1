package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
)

// The users section and the queue order reach the broker's Spec, and bad
// values are refused naming the key.
func TestUsersSection(t *testing.T) {
	const base = "sites:\n  - {name: A, kind: sim, nodes: 4}\n"
	src := base + "broker: {order: fairshare, fairshare_half_life: 24h}\n" +
		"users:\n  default: {max_running: 4, shares: 1}\n  alice: {max_queued: 10, max_running: 2, max_running_per_site: 1, shares: 3}\n"
	c, err := Parse("u.yaml", []byte(src), env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := c.Spec(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := bridge.UserLimits{MaxQueued: 10, MaxRunning: 2, MaxRunningPerSite: 1, Shares: 3}
	if spec.Users["alice"] != want || spec.Users[bridge.DefaultUser].MaxRunning != 4 || spec.Policies.Order != "fairshare" || spec.FairShareHalfLife != 24*time.Hour {
		t.Fatalf("spec: users %+v order %q half-life %v", spec.Users, spec.Policies.Order, spec.FairShareHalfLife)
	}
	for _, tc := range []struct{ src, key string }{
		{base + "users: {alice: {max_queued: -1}}\n", "users.alice.max_queued"},
		{base + "users: {'bad name': {max_queued: 1}}\n", "users.bad name"},
		{base + "users: {alice: {max_quued: 1}}\n", "max_quued"},
		{base + "users: {alice: {shares: -2}}\n", "users.alice.shares"},
		{base + "broker: {order: lottery}\n", "broker.order"},
	} {
		_, err := Parse("u.yaml", []byte(tc.src), env(map[string]string{"HOME": "/h"}))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: %v; want an error naming %s", tc.src, err, tc.key)
		}
		if err != nil && !errors.Is(err, ErrInvalid) && !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("%q: %v", tc.src, err)
		}
	}
}
