package jobrules

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseArray(t *testing.T) {
	for _, c := range []struct {
		spec  string
		first []int
		n     int
		limit int
	}{
		{"1-100%10", []int{1, 2, 3}, 100, 10},
		{"0,4,10-20:5", []int{0, 4, 10, 15, 20}, 5, 0},
		{" 7 ", []int{7}, 1, 0},
		{"0-9999", []int{0, 1}, 10000, 0},
	} {
		a, err := ParseArray(c.spec)
		if err != nil {
			t.Fatalf("%q: %v", c.spec, err)
		}
		if len(a.Indices) != c.n || a.Limit != c.limit || !slices.Equal(a.Indices[:len(c.first)], c.first) {
			t.Errorf("%q: %d indices %v..., limit %d", c.spec, len(a.Indices), a.Indices[:min(5, len(a.Indices))], a.Limit)
		}
	}
	for spec, want := range map[string]string{
		"":          "empty",
		"0-10000":   "more than 10000",
		"1-3,2":     "twice",
		"9-1":       "backwards",
		"1-5%0":     "limit",
		"1-5%x":     "limit",
		"a":         "not an index",
		"-1":        "not an index",
		"1,,2":      "empty item",
		"3:2":       "needs a range",
		"1-9:0":     "step",
		"99999999":  "not an index",
		"0-99:1,+5": "not an index",
	} {
		_, err := ParseArray(spec)
		if !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want ErrValue with %q", spec, err, want)
		}
	}
}

func TestSweep(t *testing.T) {
	n, err := SweepSize([]int{2, 3})
	if err != nil || n != 6 {
		t.Fatal(n, err)
	}
	if v := SweepValues([]int{2, 3}, 4); !slices.Equal(v, []int{1, 1}) {
		t.Fatal(v)
	}
	if _, err := SweepSize([]int{101, 100}); err == nil {
		t.Fatal("10100 elements accepted")
	}
	if StepName("123") == nil || StepName("prep") != nil {
		t.Fatal("step names")
	}
}
