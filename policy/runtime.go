package policy

import "time"

// TransferTime is t_trans(i,j) = s·b_ij + l_ij, zero when i = j. A job with
// no origin site (from < 0) comes from the submitting machine: its cost is
// the uplink to j (Snapshot.Uplinks), zero when unknown. Without links the
// transfer is free.
func (s *Snapshot) TransferTime(from, to int, size int64) time.Duration {
	var l Link
	switch {
	case from < 0:
		if to >= len(s.Uplinks) {
			return 0
		}
		l = s.Uplinks[to]
	case from == to || s.Links == nil:
		return 0
	default:
		l = s.Links[from][to]
	}
	return time.Duration(float64(size)*l.SecPerByte*float64(time.Second)) + l.Latency
}

// originH is h of the submit site, or 1 (the reference machine) without one.
func (s *Snapshot) originH(j *Job) float64 {
	if j.Origin < 0 {
		return 1
	}
	return s.Sites[j.Origin].H
}

// Runtime predicts the run time of j on the given parts, transfer excluded:
//
//	local or remote single site j: T_i·h_j/h_i = h_j·T_origin        (1), (2)
//	several sites j,k..m:          T_i·p·max(h_j..h_m)/h_i             (3)
//
// where T_i = h_i·T_origin, so the submit site's h cancels out and the
// run time depends only on the executing sites (and p when there are several).
func (s *Snapshot) Runtime(j *Job, parts []Part) time.Duration {
	maxH := 0.0
	for _, p := range parts {
		if h := s.Sites[p.Site].H; h > maxH {
			maxH = h
		}
	}
	ti := s.originH(j) * float64(j.Estimate)
	f := ti * maxH / s.originH(j)
	if len(parts) > 1 {
		p := s.MultiSite
		if p < 1 {
			p = 1
		}
		f *= p
	}
	return time.Duration(f)
}

// Transfer is the transfer term of equations (2) and (3): the largest
// t_trans(origin, site) over the parts.
func (s *Snapshot) Transfer(j *Job, parts []Part) time.Duration {
	var m time.Duration
	for _, p := range parts {
		if t := s.TransferTime(j.Origin, p.Site, j.DataSize); t > m {
			m = t
		}
	}
	return m
}
