package registry

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/policy"
)

// named is what every built-in of every kind has.
type named interface{ Name() string }

func lookup(kind policy.Kind, name string) (named, error) {
	switch kind {
	case policy.KindPlanner:
		return ByName(name)
	case policy.KindFeasibility:
		return Feasibility(name)
	case policy.KindAdmission:
		return Admission(name)
	case policy.KindTrust:
		return Trust(name)
	case policy.KindTiering:
		return Tiering(name)
	case policy.KindRemap:
		return Remap(name)
	case policy.KindOrder:
		return Order(name)
	}
	return nil, errors.New("no such kind")
}

func TestEveryBuiltinByName(t *testing.T) {
	if !slices.Equal(Kinds(), policy.Kinds()) || len(Kinds()) != 7 {
		t.Fatalf("kinds: %v", Kinds())
	}
	for _, k := range Kinds() {
		names := NamesOf(k)
		if len(names) == 0 {
			t.Fatalf("%s: no built-ins", k)
		}
		if Default(k) == "" || !slices.Contains(names, Default(k)) {
			t.Fatalf("%s: default %q is not one of %v", k, Default(k), names)
		}
		for _, n := range names {
			p, err := lookup(k, " "+strings.ToUpper(n)+" ")
			if err != nil || p.Name() != n {
				t.Fatalf("%s %s: %v, %v", k, n, p, err)
			}
			if err := Valid(k, n); err != nil {
				t.Fatalf("%s %s: %v", k, n, err)
			}
		}
		if k != policy.KindPlanner {
			p, err := lookup(k, "")
			if err != nil || p.Name() != Default(k) {
				t.Fatalf("%s: empty name gives %v, %v; want the default %s", k, p, err, Default(k))
			}
		}
		_, err := lookup(k, "no-such-policy")
		if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), names[0]) || !strings.Contains(err.Error(), "no-such-policy") {
			t.Fatalf("%s: unknown name: %v", k, err)
		}
		if !errors.Is(Valid(k, "no-such-policy"), ErrUnknown) {
			t.Fatalf("%s: Valid accepts an unknown name", k)
		}
	}
	if NamesOf("scheduler") != nil || !errors.Is(Valid("scheduler", "x"), ErrUnknown) {
		t.Fatal("an unknown kind has names")
	}
}

func TestDefaults(t *testing.T) {
	want := map[policy.Kind]string{policy.KindFeasibility: "capacity", policy.KindAdmission: "drrm",
		policy.KindTrust: "paper002", policy.KindTiering: "dgjs", policy.KindRemap: "gain", policy.KindOrder: "fcfs"}
	for k, n := range want {
		if Default(k) != n {
			t.Fatalf("default %s = %q, want %q (the broker's built-in behaviour)", k, Default(k), n)
		}
	}
}
