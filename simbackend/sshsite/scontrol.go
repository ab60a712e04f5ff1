package sshsite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// resv is a reservation as a dialect names it.
type resv struct {
	name  string // the dialect's id (SLURM: its name; PBS: R<n>.<server>)
	label string // PBS -N
	simID string // the engine's id
	users string
	nodes int
	start time.Time
	end   time.Time
}

// resvName is the dialect name of the reservation j runs in ("" = none).
func (j *job) resvName(s *Site) string {
	for _, r := range s.resvs {
		if r.simID == j.resv && j.resv != "" {
			return r.name
		}
	}
	return ""
}

// createResv asks the engine for a reservation (s.mu not held).
func (s *Site) createResv(name, label, users string, start time.Time, d time.Duration, nodes int) (*resv, error) {
	id, err := s.sim.CreateReservation(context.Background(), &backends.ReservationSpec{Start: start, Duration: d, Nodes: nodes})
	if err != nil {
		return nil, err
	}
	r := &resv{name: name, label: label, simID: string(id), users: users, nodes: nodes}
	if got, err := s.sim.ShowReservation(context.Background(), id); err == nil {
		r.start, r.end = got.Start, got.End
	}
	s.mu.Lock()
	s.resvs[name] = r
	s.mu.Unlock()
	return r, nil
}

// resvState is the engine's state of r ("pending", "active", "ended",
// "deleted").
func (s *Site) resvState(r *resv) string {
	got, err := s.sim.ShowReservation(context.Background(), backends.ResvID(r.simID))
	if err != nil {
		return "deleted"
	}
	return got.State
}

func (s *Site) scontrol(o *out, a []string, req request) int {
	if len(a) == 0 {
		return o.errf(1, "scontrol: no command given")
	}
	switch {
	case a[0] == "show" && len(a) >= 2 && a[1] == "config":
		fmt.Fprintf(&o.stdout, "Configuration data as of %s\n", time.Now().Format("2006-01-02T15:04:05"))
		for _, kv := range [][2]string{{"ClusterName", s.cfg.Name}, {"JobCompLoc", s.jobcompPath()},
			{"JobCompType", "jobcomp/filetxt"}, {"AccountingStorageType", "(null)"},
			{"MinJobAge", fmt.Sprintf("%d sec", int(s.cfg.MinJobAge/time.Second))}, {"SLURM_VERSION", "simsite"}} {
			fmt.Fprintf(&o.stdout, "%-23s = %s\n", kv[0], kv[1])
		}
		return 0
	case a[0] == "show" && len(a) >= 2 && a[1] == "job":
		return s.showJob(o, a[2:], req)
	case a[0] == "create" && len(a) >= 2 && a[1] == "reservation":
		return s.createSlurmResv(o, a[2:])
	case a[0] == "show" && len(a) >= 2 && a[1] == "reservation":
		return s.showSlurmResv(o, a[2:], req)
	case a[0] == "delete" && len(a) == 2:
		name, ok := strings.CutPrefix(a[1], "ReservationName=")
		if !ok {
			return o.errf(1, "scontrol: error: Invalid delete command: %s", a[1])
		}
		s.mu.Lock()
		r := s.resvs[name]
		s.mu.Unlock()
		if r == nil || s.resvState(r) == "deleted" || s.resvState(r) == "ended" {
			return o.errf(1, "delete_reservation ReservationName=%s: Requested reservation is invalid", name)
		}
		if err := s.sim.DeleteReservation(context.Background(), backends.ResvID(r.simID)); err != nil {
			return o.errf(1, "delete_reservation ReservationName=%s: %v", name, err)
		}
		return 0
	}
	return o.errf(1, "invalid keyword: %s", strings.Join(a, " "))
}

func (s *Site) showJob(o *out, a []string, req request) int {
	var ids []string
	for _, w := range a {
		if w != "-o" {
			ids = append(ids, w)
		}
	}
	s.mu.Lock()
	var js []*job
	if len(ids) == 0 {
		js = append(js, s.order...)
	}
	for _, id := range ids {
		if j := s.jobs[backends.JobID(id)]; j != nil {
			js = append(js, j)
		}
	}
	s.mu.Unlock()
	if len(ids) > 0 && len(js) == 0 {
		return o.errf(1, "slurm_load_jobs error: Invalid job id specified")
	}
	now := s.eng.Now()
	for _, j := range js {
		st := s.status([]backends.JobID{j.id})[j.id]
		if !s.visible(st, now) {
			if len(ids) > 0 {
				return o.errf(1, "slurm_load_jobs error: Invalid job id specified")
			}
			continue
		}
		code := 0
		if st.State.Final() && st.ExitCode > 0 {
			code = st.ExitCode
		}
		s.mu.Lock()
		reason, _ := s.squeueField("reason", j, st, req)
		end, _ := s.squeueField("endtime", j, st, req)
		fmt.Fprintf(&o.stdout, "JobId=%s JobName=%s UserId=%s Comment=%s JobState=%s Reason=%s ExitCode=%d:0 TimeLimit=%s StartTime=%s EndTime=%s Partition=%s NodeList=%s NumNodes=%d WorkDir=%s StdOut=%s StdErr=%s\n",
			j.native, j.name, j.user, j.comment, slurmState(st), reason, code, fmtLimit(j.walltime),
			slurmTime(st.Start, req), end, j.queue, orNull(s.nodeList(j)), j.nodes, j.dir, j.out, j.err)
		s.mu.Unlock()
	}
	return 0
}

func orNull(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

func (s *Site) createSlurmResv(o *out, a []string) int {
	kv := map[string]string{}
	for _, w := range a {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return o.errf(1, "scontrol: error: Invalid input: %s", w)
		}
		kv[strings.ToLower(k)] = v
	}
	name := kv["reservationname"]
	now := s.eng.Now().Truncate(time.Second)
	start := now
	switch st := kv["starttime"]; {
	case st == "now" || st == "":
	case strings.HasPrefix(st, "now+"):
		n, err := strconv.Atoi(st[4:])
		if err != nil || n < 0 {
			return o.errf(1, "Error creating the reservation: Invalid start time")
		}
		start = now.Add(time.Duration(n) * time.Second)
	default:
		return o.errf(1, "Error creating the reservation: Invalid start time")
	}
	mins, err := strconv.Atoi(kv["duration"])
	nodes, err2 := strconv.Atoi(kv["nodecnt"])
	switch {
	case name == "":
		return o.errf(1, "Error creating the reservation: ReservationName is required by this site")
	case err != nil || mins < 1:
		return o.errf(1, "Error creating the reservation: Invalid duration")
	case err2 != nil || nodes < 1:
		return o.errf(1, "Error creating the reservation: Invalid node count")
	case kv["users"] == "":
		return o.errf(1, "Error creating the reservation: Either Users or Accounts must be specified.  No reservation created.")
	case kv["partitionname"] != "" && kv["partitionname"] != partition:
		return o.errf(1, "Error creating the reservation: Invalid partition name specified")
	}
	s.mu.Lock()
	taken := s.resvs[name] != nil
	s.mu.Unlock()
	if taken {
		return o.errf(1, "Error creating the reservation: Reservation request overlaps with an existing reservation or the name is in use")
	}
	if _, err := s.createResv(name, name, kv["users"], start, time.Duration(mins)*time.Minute, nodes); err != nil {
		if errors.Is(err, backends.ErrRejected) {
			return o.errf(1, "Error creating the reservation: Requested nodes are busy")
		}
		return o.errf(1, "Error creating the reservation: %v", err)
	}
	fmt.Fprintf(&o.stdout, "Reservation created: %s\n", name)
	return 0
}

func (s *Site) showSlurmResv(o *out, a []string, req request) int {
	var names []string
	for _, w := range a {
		if w != "-o" {
			names = append(names, w)
		}
	}
	s.mu.Lock()
	var rs []*resv
	for n, r := range s.resvs {
		if len(names) == 0 || names[0] == n {
			rs = append(rs, r)
		}
	}
	s.mu.Unlock()
	var shown int
	for _, r := range rs {
		st := s.resvState(r)
		if st == "deleted" || st == "ended" {
			continue
		}
		shown++
		state := "INACTIVE"
		if st == "active" {
			state = "ACTIVE"
		}
		fmt.Fprintf(&o.stdout, "ReservationName=%s StartTime=%s EndTime=%s Duration=%s Nodes=%s-n[1-%d] NodeCnt=%d CoreCnt=%d Features=(null) PartitionName=%s Flags= Users=%s State=%s\n",
			r.name, slurmTime(r.start, req), slurmTime(r.end, req), fmtLimit(r.end.Sub(r.start)), s.cfg.Name, r.nodes,
			r.nodes, r.nodes*s.cfg.Cores, partition, r.users, state)
	}
	if shown == 0 && len(names) > 0 {
		return o.errf(1, "Reservation %s not found", names[0])
	}
	if shown == 0 {
		o.stdout.WriteString("No reservations in the system\n")
	}
	return 0
}
