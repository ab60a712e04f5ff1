package batchscript

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// maxWalltime bounds a time limit: a year.
const maxWalltime = 366 * 24 * time.Hour

// SlurmTime parses SLURM's time forms: "M", "M:S", "H:M:S", "D-H",
// "D-H:M" and "D-H:M:S". UNLIMITED and INFINITE are refused (gridsub
// needs a limit to plan); 0 too.
func SlurmTime(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	switch strings.ToUpper(t) {
	case "UNLIMITED", "INFINITE", "-1":
		return 0, fmt.Errorf("%q: gridsub needs a time limit to place the job; give one like 2:00:00", s)
	}
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("%q: want minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S", s)
	}
	days := 0
	rest := t
	if d, r, ok := strings.Cut(t, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || d == "" {
			return bad()
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	nums := make([]int, len(parts))
	for i, x := range parts {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 || x == "" || len(x) > 9 {
			return bad()
		}
		nums[i] = n
	}
	var h, m, sec int
	switch {
	case t != rest: // with days: D-H, D-H:M, D-H:M:S
		if len(nums) > 3 {
			return bad()
		}
		h = nums[0]
		if len(nums) > 1 {
			m = nums[1]
		}
		if len(nums) > 2 {
			sec = nums[2]
		}
	case len(nums) == 1:
		m = nums[0]
	case len(nums) == 2:
		m, sec = nums[0], nums[1]
	case len(nums) == 3:
		h, m, sec = nums[0], nums[1], nums[2]
	default:
		return bad()
	}
	return limit(s, days, h, m, sec)
}

// PBSTime parses PBS's walltime: "S", "M:S" or "H:M:S" (hours may exceed
// 24), seconds possibly with a fraction.
func PBSTime(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	parts := strings.Split(t, ":")
	if len(parts) > 3 || t == "" {
		return 0, fmt.Errorf("%q: want seconds, M:S or H:M:S", s)
	}
	nums := make([]int, 3)
	off := 3 - len(parts)
	for i, x := range parts {
		if i == len(parts)-1 {
			x, _, _ = strings.Cut(x, ".") // fractions of a second
		}
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 || x == "" || len(x) > 9 {
			return 0, fmt.Errorf("%q: want seconds, M:S or H:M:S", s)
		}
		nums[off+i] = n
	}
	return limit(s, 0, nums[0], nums[1], nums[2])
}

func limit(s string, days, h, m, sec int) (time.Duration, error) {
	d := time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second
	switch {
	case days > 366 || h > 366*24 || m > 366*24*60 || sec > 366*24*3600 || d > maxWalltime:
		return 0, fmt.Errorf("%q is more than a year", s)
	case d <= 0:
		return 0, fmt.Errorf("%q is zero; give a time limit above zero", s)
	}
	return d, nil
}

// SlurmSize parses SLURM's memory sizes: a whole number with K, M, G or T
// (powers of 1024); a bare number is megabytes, as in SLURM.
func SlurmSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1) << 20
	if t != "" {
		switch t[len(t)-1] {
		case 'K', 'k':
			mult, t = 1<<10, t[:len(t)-1]
		case 'M', 'm':
			mult, t = 1<<20, t[:len(t)-1]
		case 'G', 'g':
			mult, t = 1<<30, t[:len(t)-1]
		case 'T', 't':
			mult, t = 1<<40, t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q: want a whole number with K, M, G or T (a bare number is megabytes)", s)
	}
	if n > jobrules.MaxMemPerNode/mult {
		return 0, fmt.Errorf("%q is more than 1PiB", s)
	}
	return n * mult, nil
}

// PBSSize parses PBS's sizes: a whole number with b, kb, mb, gb or tb
// (any case, powers of 1024); a bare number is bytes.
func PBSSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			mult, t = u.m, strings.TrimSuffix(t, u.suf)
			break
		}
	}
	if strings.HasSuffix(t, "w") {
		return 0, fmt.Errorf("%q: sizes in words are not supported; give bytes (gb, mb)", s)
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a whole number above zero with b, kb, mb, gb or tb", s)
	}
	if n > jobrules.MaxMemPerNode/mult {
		return 0, fmt.Errorf("%q is more than 1PiB", s)
	}
	return n * mult, nil
}

// parseArray checks an array spec with gridsub's rules (SLURM's syntax).
func parseArray(v string) (jobrules.Array, error) {
	return jobrules.ParseArray(v)
}
