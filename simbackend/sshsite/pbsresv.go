package sshsite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
)

// rsub creates an advance reservation: pbs_rsub -R <start> -D <secs>
// -l select=N[:ncpus=C] [-l place=...] [-N name] [-U users] [-I wait]. The
// simulated scheduler decides at once: CONFIRMED or DENIED with -I,
// otherwise UNCONFIRMED (and confirmed immediately after).
func (s *Site) rsub(o *out, a []string, req request) int {
	var start time.Time
	var dur time.Duration
	nodes, label, users := 0, "", req.Env["USER"]
	interactive := false
	for i := 0; i < len(a); i++ {
		if i+1 >= len(a) {
			return o.errf(2, "pbs_rsub: option %s needs a value", a[i])
		}
		w, v := a[i], a[i+1]
		i++
		switch w {
		case "-R":
			t, err := time.ParseInLocation(pbs.RsubTimeLayout, v, time.Local)
			if err != nil {
				t, err = time.ParseInLocation("200601021504", v, time.Local)
			}
			if err != nil {
				return o.errf(2, "pbs_rsub: illegally formed start time: %s", v)
			}
			start = t
		case "-D":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				d, ok := pbsDuration(v)
				if !ok {
					return o.errf(2, "pbs_rsub: illegal -D value")
				}
				n = int(d / time.Second)
			}
			dur = time.Duration(n) * time.Second
		case "-l":
			if m := selectRe().FindStringSubmatch(v); m != nil {
				nodes, _ = strconv.Atoi(m[1])
			} else if !strings.HasPrefix(v, "place=") {
				return o.errf(2, "pbs_rsub: Unknown resource: %s", v)
			}
		case "-N":
			label = v
		case "-U":
			users = v
		case "-I":
			interactive = true
		default:
			return o.errf(2, "usage: pbs_rsub [-I seconds] [-m mail_points] [-M mail_list] [-N reservation_name] [-u user_list] [-g group_list] [-U auth_user_list] [-G auth_group_list] [-H auth_host_list] [-R start_time] [-E end_time] [-D duration] [-q destination] [-r rrule] [-W otherattributes=value...] -l resource_list")
		}
	}
	switch {
	case start.IsZero() || dur <= 0:
		return o.errf(2, "pbs_rsub: a start time (-R) and a duration (-D) are required by this site")
	case nodes < 1:
		return o.errf(2, "pbs_rsub: -l select=<n> is required")
	case start.Before(s.eng.Now().Add(-time.Second)):
		return o.errf(1, "pbs_rsub: Bad time specification(s)")
	}
	s.mu.Lock()
	s.nresv++
	name := fmt.Sprintf("R%d.%s", s.nresv, s.cfg.Name)
	s.mu.Unlock()
	if label == "" {
		label = "NULL"
	}
	if _, err := s.createResv(name, label, users, start, dur, nodes); err != nil {
		if interactive {
			fmt.Fprintf(&o.stdout, "%s DENIED\n", name)
			return 0
		}
		fmt.Fprintf(&o.stdout, "%s UNCONFIRMED\n", name)
		return 0
	}
	if interactive {
		fmt.Fprintf(&o.stdout, "%s CONFIRMED\n", name)
	} else {
		fmt.Fprintf(&o.stdout, "%s UNCONFIRMED\n", name)
	}
	return 0
}

// findPBSResv finds a reservation by "R<n>.<server>" or "R<n>" (s.mu held).
func (s *Site) findPBSResv(id string) *resv {
	q, srv, _ := strings.Cut(id, ".")
	if srv != "" && srv != s.cfg.Name {
		return nil
	}
	return s.resvs[q+"."+s.cfg.Name]
}

func (s *Site) rstat(o *out, a []string) int {
	var ids []string
	for _, w := range a {
		if w != "-f" && w != "-F" {
			ids = append(ids, w)
		}
	}
	s.mu.Lock()
	var rs []*resv
	if len(ids) == 0 {
		for _, r := range s.resvs {
			rs = append(rs, r)
		}
	}
	for _, id := range ids {
		if r := s.findPBSResv(id); r != nil {
			rs = append(rs, r)
		}
	}
	s.mu.Unlock()
	ct := func(t time.Time) string { return t.Local().Format(pbs.CtimeLayout) }
	shown := 0
	for _, r := range rs {
		st := s.resvState(r)
		state, sub := "RESV_CONFIRMED", "2"
		switch st {
		case "active":
			state, sub = "RESV_RUNNING", "5"
		case "ended", "deleted":
			continue
		}
		shown++
		var chunks []string
		for i := 0; i < r.nodes; i++ {
			chunks = append(chunks, fmt.Sprintf("(%s:ncpus=%d)", s.nodeName(i), s.cfg.Cores))
		}
		q, _, _ := strings.Cut(r.name, ".")
		fmt.Fprintf(&o.stdout, "Resv ID: %s\nReserve_Name = %s\nReserve_Owner = %s@%s\nreserve_state = %s\nreserve_substate = %s\n"+
			"reserve_start = %s\nreserve_end = %s\nreserve_duration = %d\nqueue = %s\nResource_List.nodect = %d\n"+
			"Resource_List.select = %d:ncpus=%d\nResource_List.walltime = %s\nresv_nodes = %s\nAuthorized_Users = %s\nserver = %s\n\n",
			r.name, r.label, r.users, s.cfg.Name, state, sub, ct(r.start), ct(r.end), int(r.end.Sub(r.start)/time.Second), q,
			r.nodes, r.nodes, s.cfg.Cores, pbsHMS(r.end.Sub(r.start)), strings.Join(chunks, "+"), r.users, s.cfg.Name)
	}
	if shown == 0 && len(ids) > 0 {
		return o.errf(0, "pbs_rstat: Unknown Reservation Id") // sic: OpenPBS 23.06 exits 0
	}
	return 0
}

func (s *Site) rdel(o *out, a []string) int {
	code := 0
	for _, id := range a {
		s.mu.Lock()
		r := s.findPBSResv(id)
		s.mu.Unlock()
		if r == nil {
			code = o.errf(236, "pbs_rdel: Unknown Reservation Id %s", id)
			continue
		}
		if st := s.resvState(r); st == "ended" || st == "deleted" {
			code = o.errf(236, "pbs_rdel: Unknown Reservation Id %s", id)
			continue
		}
		s.sim.DeleteReservation(context.Background(), backends.ResvID(r.simID))
	}
	return code
}
