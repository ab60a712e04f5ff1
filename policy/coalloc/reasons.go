package coalloc

import (
	"strconv"
	"time"

	"github.com/gridsub/gridsub/policy"
)

// Reasons are built by appending to byte slices: a conservative pass writes
// a few reasons for every queued job, and fmt would be a third of its cost.

// str copies b into a string.
func str(b []byte) string { return string(b) }

// clock formats a time for reasons: the UTC clock time, with the date when it
// is not Now's day.
func clock(s *policy.Snapshot, t time.Time) string {
	var b [20]byte
	return string(appendClock(b[:0], "", s, t))
}

// appendClock appends prefix and then t as clock() formats it.
func appendClock(b []byte, prefix string, s *policy.Snapshot, t time.Time) []byte {
	b = append(b, prefix...)
	t, now := t.UTC().Round(time.Second), s.Now.UTC()
	if y, d := t.Year(), t.YearDay(); y != now.Year() || d != now.YearDay() {
		_, mo, day := t.Date()
		b = append(b, byte('0'+y/1000%10), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
			byte('0'+int(mo)/10), byte('0'+int(mo)%10), '-', byte('0'+day/10), byte('0'+day%10), ' ')
	}
	h, m, sec := t.Clock()
	return append(b, byte('0'+h/10), byte('0'+h%10), ':', byte('0'+m/10), byte('0'+m%10), ':', byte('0'+sec/10), byte('0'+sec%10))
}

// partList names the parts: "Beijing(32)+Shanghai(16)"; long lists are cut.
func partList(s *policy.Snapshot, parts []policy.Part) string {
	return string(appendParts(nil, s, parts))
}

func appendParts(b []byte, s *policy.Snapshot, parts []policy.Part) []byte {
	for i, p := range parts {
		if i == 4 {
			b = strconv.AppendInt(append(b, '+'), int64(len(parts)-i), 10)
			return append(b, " more sites"...)
		}
		if i > 0 {
			b = append(b, '+')
		}
		b = appendSiteName(b, s, p.Site)
		b = append(strconv.AppendInt(append(b, '('), int64(p.Nodes), 10), ')')
	}
	return b
}

// trustList is the trust of the parts' sites: "Shanghai 0.61, Harbin 1".
func trustList(s *policy.Snapshot, parts []policy.Part) string {
	var b []byte
	for i, p := range parts {
		if i > 0 {
			b = append(b, ", "...)
		}
		tr := s.Sites[p.Site].Trust
		if tr <= 0 {
			tr = 1
		}
		b = strconv.AppendFloat(append(appendSiteName(b, s, p.Site), ' '), tr, 'g', 2, 64)
	}
	return string(b)
}

// siteList names sites, with a number each when val is set: "Beijing 128,
// Shanghai 64"; long lists are cut.
func siteList(s *policy.Snapshot, sites []int, val func(int) int) string {
	return string(appendSites(nil, s, sites, val))
}

func appendSites(b []byte, s *policy.Snapshot, sites []int, val func(int) int) []byte {
	for i, x := range sites {
		if i == 6 {
			b = strconv.AppendInt(append(b, " and "...), int64(len(sites)-i), 10)
			return append(b, " more"...)
		}
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendSiteName(b, s, x)
		if val != nil {
			b = strconv.AppendInt(append(b, ' '), int64(val(x)), 10)
		}
	}
	return b
}

func siteName(s *policy.Snapshot, i int) string {
	return string(appendSiteName(nil, s, i))
}

func appendSiteName(b []byte, s *policy.Snapshot, i int) []byte {
	if n := s.Sites[i].Name; n != "" {
		return append(b, n...)
	}
	return strconv.AppendInt(append(b, "site"...), int64(i), 10)
}

// misfitText is "siteA: 2 cores per node, the job asks 4; siteC: no GPUs,
// the job asks 1 per node".
func misfitText(s *policy.Snapshot, mis []policy.Misfit) string {
	var b []byte
	for k, m := range mis {
		if k > 0 {
			b = append(b, "; "...)
		}
		b = append(appendSiteName(b, s, m.Site), ": "...)
		b = append(b, m.Why...)
	}
	return string(b)
}

// misfitReasons explains the sites a decision left out because their
// nodes lack what the job asks per node (none when it asks nothing).
func misfitReasons(s *policy.Snapshot, j *policy.Job) []string {
	mis := s.Misfits(j)
	if len(mis) == 0 {
		return nil
	}
	return []string{"not eligible (node shape): " + misfitText(s, mis)}
}
