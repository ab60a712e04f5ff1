package gridengine

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Every parser here is pure: bytes in, records out, no clock and no I/O.
// Unreadable output is an error wrapping backends.ErrBadOutput that quotes
// the text (sshbatch.BadOutput). The testdata/ files are the real
// daemons' output (Debian's gridengine 8.1.9, scripts/sge-testbed.sh).

var (
	jobIDRe  = regexp.MustCompile(`^[1-9][0-9]{0,17}$`)
	resvIDRe = regexp.MustCompile(`^[1-9][0-9]{0,17}$`)
)

func validJobID(s string) bool { return jobIDRe.MatchString(s) }

// validJobOrTask: a job number or an array task ("<job>.<task>").
func validJobOrTask(s string) bool {
	_, _, ok := SplitTaskID(s)
	return ok || validJobID(s)
}
func validResvID(s string) bool { return resvIDRe.MatchString(s) }

// TagVar is the job variable (qsub -v) that carries the grid tag.
const TagVar = "GRIDSUB_TAG"

// GridTag is the value of TagVar for a grid job.
func GridTag(gridID string) string { return "g:" + gridID }

// GridFromTag inverts GridTag ("" when v is not a tag).
func GridFromTag(v string) string {
	g, ok := strings.CutPrefix(v, "g:")
	if !ok {
		return ""
	}
	return g
}

// ParseQsub reads `qsub -terse`'s stdout: the new job's number alone on a
// line ("17"; an array job prints "16.1-3:1", read as 16).
func ParseQsub(out []byte) (backends.JobID, error) {
	ls := sshbatch.Lines(out)
	if len(ls) != 1 {
		return "", sshbatch.BadOutput("qsub -terse", out, "want one job number")
	}
	id, _, _ := strings.Cut(strings.TrimSpace(ls[0]), ".")
	if !validJobID(id) {
		return "", sshbatch.BadOutput("qsub -terse", out, "want one job number such as 17")
	}
	return backends.JobID(id), nil
}

// Job is one entry of `qstat -xml`: a job, or one task of an array job.
type Job struct {
	Number    string `xml:"JB_job_number"`
	Name      string `xml:"JB_name"`
	Owner     string `xml:"JB_owner"`
	State     string `xml:"state"`
	Start     string `xml:"JAT_start_time"`
	Submitted string `xml:"JB_submission_time"`
	Queue     string `xml:"queue_name"`
	Slots     int    `xml:"slots"`
	Tasks     string `xml:"tasks"`
}

type qstatDoc struct {
	XMLName xml.Name `xml:"job_info"`
	Running []Job    `xml:"queue_info>job_list"`
	Pending []Job    `xml:"job_info>job_list"`
}

// ParseQstatXML reads `qstat -xml`: the jobs the qmaster holds, those in
// queue instances first, then the pending ones.
func ParseQstatXML(out []byte) ([]Job, error) {
	var d qstatDoc
	if err := xml.Unmarshal(out, &d); err != nil {
		return nil, sshbatch.BadOutput("qstat -xml", out, err.Error())
	}
	jobs := append(d.Running, d.Pending...)
	for i := range jobs {
		j := &jobs[i]
		j.Number, j.State = strings.TrimSpace(j.Number), strings.TrimSpace(j.State)
		if !validJobID(j.Number) || j.State == "" {
			return nil, sshbatch.BadOutput("qstat -xml", out, fmt.Sprintf("job entry %d has job number %q and state %q", i, j.Number, j.State))
		}
		if _, err := ParseTaskSet(j.Tasks); err != nil {
			return nil, sshbatch.BadOutput("qstat -xml", out, fmt.Sprintf("job %s: %v", j.Number, err))
		}
	}
	return jobs, nil
}

// XMLTimeLayout is how qstat -xml and qrstat -xml write a time: the
// qmaster's local time, without a zone.
const XMLTimeLayout = "2006-01-02T15:04:05"

// Status maps a qstat entry to a job status. Grid Engine's state letters:
// q queued, w waiting, h hold, r running, t transferring, R restarted,
// s/S/T suspended, E error, d being deleted.
func (j *Job) Status(loc *time.Location) backends.JobStatus {
	st := backends.JobStatus{ID: backends.JobID(j.Number), Name: j.Name, ExitCode: -1, Reason: j.State}
	switch {
	case strings.ContainsAny(j.State, "rt"):
		st.State = backends.StateRunning
		if strings.ContainsAny(j.State, "sST") {
			st.Reason = j.State + " (suspended)"
		}
		if t, err := time.ParseInLocation(XMLTimeLayout, j.Start, loc); err == nil {
			st.Start = t
		}
		st.NodeList = j.Queue
	default:
		st.State = backends.StatePending
		switch {
		case strings.Contains(j.State, "E"):
			st.Reason = j.State + " (error state: the job cannot start until an operator clears it; qstat -j " + j.Number + " says why)"
		case strings.Contains(j.State, "h"):
			st.Reason = j.State + " (held)"
		}
	}
	return st
}

// Host is one execution host of `qhost -xml`.
type Host struct {
	Name     string
	NCPU     int
	MemTotal int64 // bytes (0 = not reported)
}

type qhostDoc struct {
	XMLName xml.Name `xml:"qhost"`
	Hosts   []struct {
		Name   string `xml:"name,attr"`
		Values []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:",chardata"`
		} `xml:"hostvalue"`
	} `xml:"host"`
}

// ParseQhostXML reads `qhost -xml`: every execution host that reports
// (the "global" pseudo host and hosts without an architecture, i.e. not
// reporting, are left out).
func ParseQhostXML(out []byte) ([]Host, error) {
	var d qhostDoc
	if err := xml.Unmarshal(out, &d); err != nil {
		return nil, sshbatch.BadOutput("qhost -xml", out, err.Error())
	}
	var hosts []Host
	for _, h := range d.Hosts {
		if h.Name == "global" {
			continue
		}
		v := map[string]string{}
		for _, x := range h.Values {
			v[x.Name] = strings.TrimSpace(x.Value)
		}
		if v["arch_string"] == "" || v["arch_string"] == "-" {
			continue
		}
		n, err := strconv.Atoi(v["num_proc"])
		if err != nil || n < 1 {
			return nil, sshbatch.BadOutput("qhost -xml", out, fmt.Sprintf("host %s has num_proc %q", h.Name, v["num_proc"]))
		}
		mem, err := ParseMemory(v["mem_total"])
		if err != nil {
			return nil, sshbatch.BadOutput("qhost -xml", out, fmt.Sprintf("host %s: %v", h.Name, err))
		}
		hosts = append(hosts, Host{Name: h.Name, NCPU: n, MemTotal: mem})
	}
	return hosts, nil
}

// ParseMemory reads a Grid Engine memory value ("23.5G", "823.9M", "512K",
// "1024"; K, M, G, T are powers of 1024, k, m, g, t of 1000); "-" is 0.
func ParseMemory(s string) (int64, error) {
	if s == "-" || s == "" {
		return 0, nil
	}
	mult := 1.0
	switch s[len(s)-1] {
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	case 'T':
		mult = 1 << 40
	case 'k':
		mult = 1e3
	case 'm':
		mult = 1e6
	case 'g':
		mult = 1e9
	case 't':
		mult = 1e12
	}
	num := s
	if mult != 1 {
		num = s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f*mult > 1<<62 {
		return 0, fmt.Errorf("memory value %q", s)
	}
	return int64(f * mult), nil
}

// ParseQueueList reads `qconf -sql`: one cluster queue per line ("no
// cqueue list defined" is none).
func ParseQueueList(out []byte) ([]string, error) {
	var qs []string
	for _, l := range sshbatch.Lines(out) {
		l = strings.TrimSpace(l)
		if l == "no cqueue list defined" {
			return nil, nil
		}
		if !queueRe.MatchString(l) {
			return nil, sshbatch.BadOutput("qconf -sql", out, fmt.Sprintf("%q is not a queue name", l))
		}
		qs = append(qs, l)
	}
	return qs, nil
}

var queueRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// ClusterQueue is one line of `qstat -g c`: a cluster queue's slots.
type ClusterQueue struct {
	Name                           string
	Used, Reserved, Avail, Total   int
	Unavailable, DisabledSuspended int // slots of queue instances in states aoACDS and cdsuE
}

// ParseClusterQueues reads `qstat -g c`.
func ParseClusterQueues(out []byte) ([]ClusterQueue, error) {
	ls := sshbatch.Lines(out)
	if len(ls) == 0 {
		return nil, nil
	}
	if len(ls) < 2 || !strings.HasPrefix(ls[0], "CLUSTER QUEUE") || strings.Trim(ls[1], "-") != "" {
		return nil, sshbatch.BadOutput("qstat -g c", out, "want the CLUSTER QUEUE header and a line of dashes")
	}
	var cqs []ClusterQueue
	for _, l := range ls[2:] {
		f := strings.Fields(l)
		if len(f) != 8 || !queueRe.MatchString(f[0]) {
			return nil, sshbatch.BadOutput("qstat -g c", out, fmt.Sprintf("line %q: want 8 fields", l))
		}
		var n [6]int
		for i := range n {
			v, err := strconv.Atoi(f[2+i])
			if err != nil || v < 0 {
				return nil, sshbatch.BadOutput("qstat -g c", out, fmt.Sprintf("line %q: field %d is not a count", l, 3+i))
			}
			n[i] = v
		}
		cqs = append(cqs, ClusterQueue{Name: f[0], Used: n[0], Reserved: n[1], Avail: n[2], Total: n[3], Unavailable: n[4], DisabledSuspended: n[5]})
	}
	return cqs, nil
}

// Acct is one record of `qacct -j`: how a job that ran ended.
type Acct struct {
	Number     string
	Task       int // the array task (0: not an array job; qacct's taskid "undefined")
	Owner      string
	Name       string
	Failed     int    // Grid Engine's own failure code (0: the job's script ran to its end)
	FailedText string // its words ("qmaster enforced h_rt, h_cpu, or h_vmem limit")
	ExitStatus int    // the script's exit status (128+n: killed by signal n)
	Start, End time.Time
	Arid       string // the advance reservation ("undefined": none)
}

// QacctTimeLayout is qacct's ctime-style time, in the qmaster's zone.
const QacctTimeLayout = "Mon Jan _2 15:04:05 2006"

// ParseQacct reads `qacct -j`'s records (blocks after a line of '='s, a
// "key value" per line). "error: job id N not found" alone is no record.
func ParseQacct(out []byte, loc *time.Location) ([]Acct, error) {
	var recs []Acct
	var cur map[string]string
	flush := func() error {
		if cur == nil {
			return nil
		}
		a := Acct{Number: cur["jobnumber"], Owner: cur["owner"], Name: cur["jobname"], Arid: cur["arid"]}
		if !validJobID(a.Number) {
			return sshbatch.BadOutput("qacct -j", out, fmt.Sprintf("record with jobnumber %q", a.Number))
		}
		var err error
		if tid := cur["taskid"]; tid != "" && tid != "undefined" {
			if a.Task, err = strconv.Atoi(tid); err != nil || a.Task < 1 {
				return sshbatch.BadOutput("qacct -j", out, fmt.Sprintf("job %s: taskid %q", a.Number, tid))
			}
		}
		fc, ft, _ := strings.Cut(cur["failed"], ":")
		if a.Failed, err = strconv.Atoi(strings.TrimSpace(fc)); err != nil {
			return sshbatch.BadOutput("qacct -j", out, fmt.Sprintf("job %s: failed %q", a.Number, cur["failed"]))
		}
		a.FailedText = strings.TrimSpace(ft)
		es, _, _ := strings.Cut(cur["exit_status"], " ")
		if a.ExitStatus, err = strconv.Atoi(es); err != nil {
			return sshbatch.BadOutput("qacct -j", out, fmt.Sprintf("job %s: exit_status %q", a.Number, cur["exit_status"]))
		}
		a.Start, _ = time.ParseInLocation(QacctTimeLayout, cur["start_time"], loc)
		a.End, _ = time.ParseInLocation(QacctTimeLayout, cur["end_time"], loc)
		recs = append(recs, a)
		cur = nil
		return nil
	}
	for _, l := range sshbatch.Lines(out) {
		if strings.Trim(l, "=") == "" {
			if err := flush(); err != nil {
				return nil, err
			}
			cur = map[string]string{}
			continue
		}
		if cur == nil {
			if strings.HasPrefix(l, "error: job id ") && strings.HasSuffix(l, " not found") {
				continue
			}
			return nil, sshbatch.BadOutput("qacct -j", out, fmt.Sprintf("line %q before the first record", l))
		}
		k, v, _ := strings.Cut(l, " ")
		cur[k] = strings.TrimSpace(v)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return recs, nil
}

// ID is the record's job: its number, or "<job>.<task>" for an array task.
func (a *Acct) ID() backends.JobID {
	if a.Task > 0 {
		return TaskID(a.Number, a.Task)
	}
	return backends.JobID(a.Number)
}

// Status is how the job of an accounting record ended. failed 37 is the
// qmaster's h_rt enforcement: a timeout. Any other failure code, or a
// non-zero exit status, is a failure.
func (a *Acct) Status() backends.JobStatus {
	st := backends.JobStatus{ID: a.ID(), Name: a.Name, ExitCode: a.ExitStatus, Start: a.Start, End: a.End}
	if a.ExitStatus > 128 && a.ExitStatus < 160 {
		st.Signal = a.ExitStatus - 128
	}
	switch {
	case a.Failed == 37 || a.Failed != 0 && strings.Contains(a.FailedText, "h_rt"):
		st.State, st.Reason = backends.StateTimeout, fmt.Sprintf("failed %d: %s", a.Failed, a.FailedText)
	case a.Failed != 0:
		st.State, st.Reason = backends.StateFailed, fmt.Sprintf("failed %d: %s", a.Failed, a.FailedText)
	case a.ExitStatus != 0:
		st.State, st.Reason = backends.StateFailed, "exit status "+strconv.Itoa(a.ExitStatus)
	default:
		st.State = backends.StateCompleted
	}
	return st
}

// Marks of the status script's sections (statusScript).
const (
	acctMark      = "#gridsub-acct"
	cancelledMark = "#gridsub-cancelled"
	tagsMark      = "#gridsub-tags"
)

// Polled is what one status command reports.
type Polled struct {
	Live      []Job             // qstat -xml
	Acct      []Acct            // qacct records of jobs no longer live
	Cancelled []string          // jobs and array tasks gridsub's qdel deleted (their marker files)
	GridIDs   map[string]string // job number -> grid id or array tag (sshbatch.ArrayTag), from the index
}

// ParseStatus reads statusScript's output: qstat -xml, then acctMark and
// the qacct records of the ids not live, then cancelledMark and the ids
// cancelled, one per line, then tagsMark and "<id>:<grid id>" lines.
func ParseStatus(out []byte, loc *time.Location) (*Polled, error) {
	x, rest, ok := bytes.Cut(out, []byte("\n"+acctMark+"\n"))
	if !ok {
		return nil, sshbatch.BadOutput("qstat/qacct", out, "no "+acctMark+" line")
	}
	acct, rest, ok := bytes.Cut(rest, []byte(cancelledMark+"\n"))
	if !ok {
		return nil, sshbatch.BadOutput("qstat/qacct", out, "no "+cancelledMark+" line")
	}
	canc, tags, ok := bytes.Cut(rest, []byte(tagsMark+"\n"))
	if !ok {
		return nil, sshbatch.BadOutput("qstat/qacct", out, "no "+tagsMark+" line")
	}
	live, err := ParseQstatXML(x)
	if err != nil {
		return nil, err
	}
	recs, err := ParseQacct(acct, loc)
	if err != nil {
		return nil, err
	}
	p := &Polled{Live: live, Acct: recs, GridIDs: map[string]string{}}
	for _, l := range sshbatch.Lines(tags) {
		id, g, ok := strings.Cut(l, ":")
		_, _, isArray := sshbatch.FromArrayTag(g)
		if !ok || !validJobID(id) || !sshbatch.ValidGridID(g) && !isArray {
			return nil, sshbatch.BadOutput("qstat/qacct", out, fmt.Sprintf("index line %q is not <job number>:<grid id or array tag>", l))
		}
		p.GridIDs[id] = g
	}
	for _, l := range sshbatch.Lines(canc) {
		if !validJobOrTask(strings.TrimSpace(l)) {
			return nil, sshbatch.BadOutput("qstat/qacct", out, fmt.Sprintf("cancelled line %q is not a job number or array task", l))
		}
		p.Cancelled = append(p.Cancelled, strings.TrimSpace(l))
	}
	return p, nil
}

// Tagged is one job of the `qstat -j` listing (tagScript).
type Tagged struct {
	Number, Owner, Cwd, Name string
	Tag                      string  // the value of TagVar in env_list ("" = none)
	Tasks                    TaskSet // an array job's tasks ("job-array tasks"; nil = not an array)
}

// ParseTagged reads `qstat -u USER -j '*'` (whole, or the lines tagScript
// keeps): job_number, owner, cwd, job_name, env_list and job-array tasks of
// each job. "Following jobs do not exist" (no jobs) is an empty listing.
func ParseTagged(out []byte) ([]Tagged, error) {
	var ts []Tagged
	for _, l := range sshbatch.Lines(out) {
		k, v, ok := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		if !ok {
			switch {
			case strings.Trim(l, "=") == "" || strings.TrimSpace(l) == "*":
				continue // a block's separator; the "*" of "Following jobs do not exist"
			case len(ts) > 0:
				continue // a line of a job's block this listing does not read
			}
			return nil, sshbatch.BadOutput("qstat -j", out, fmt.Sprintf("line %q", l))
		}
		if k == "job_number" {
			if !validJobID(v) {
				return nil, sshbatch.BadOutput("qstat -j", out, fmt.Sprintf("job_number %q", v))
			}
			ts = append(ts, Tagged{Number: v})
			continue
		}
		if k == "Following jobs do not exist" {
			continue
		}
		if len(ts) == 0 {
			return nil, sshbatch.BadOutput("qstat -j", out, fmt.Sprintf("line %q before the first job_number", l))
		}
		t := &ts[len(ts)-1]
		switch k {
		case "owner":
			t.Owner = v
		case "cwd":
			t.Cwd = v
		case "job_name":
			t.Name = v
		case "job-array tasks":
			ts, err := ParseTaskSet(v)
			if err != nil {
				return nil, sshbatch.BadOutput("qstat -j", out, fmt.Sprintf("job %s: %v", t.Number, err))
			}
			t.Tasks = ts
		case "env_list":
			for _, kv := range strings.Split(v, ",") {
				if tag, ok := strings.CutPrefix(kv, TagVar+"="); ok {
					t.Tag = tag
				}
			}
		}
	}
	return ts, nil
}

var qrsubRe = regexp.MustCompile(`^Your advance reservation ([0-9]+) has been granted$`)

// ParseQrsub reads qrsub's stdout: "Your advance reservation N has been
// granted".
func ParseQrsub(out []byte) (backends.ResvID, error) {
	ls := sshbatch.Lines(out)
	if len(ls) == 1 {
		if m := qrsubRe.FindStringSubmatch(strings.TrimSpace(ls[0])); m != nil && validResvID(m[1]) {
			return backends.ResvID(m[1]), nil
		}
	}
	return "", sshbatch.BadOutput("qrsub", out, "want \"Your advance reservation N has been granted\"")
}

// AR is one advance reservation of `qrstat -ar ID -xml`.
type AR struct {
	ID, Name, Owner, State string
	Start, End             time.Time
	Slots                  int      // granted slots, all queue instances
	Instances              []string // queue instances granted
}

type qrstatDoc struct {
	XMLName xml.Name `xml:"qrstat"`
	Unknown []string `xml:"ar_unknown>id"`
	ARs     []struct {
		ID      string `xml:"id"`
		Name    string `xml:"name"`
		Owner   string `xml:"owner"`
		State   string `xml:"state"`
		Start   string `xml:"start_time"`
		End     string `xml:"end_time"`
		Granted []struct {
			Queue string `xml:"queue_instance,attr"`
			Slots int    `xml:"slots,attr"`
		} `xml:"granted_slots_list>granted_slots"`
	} `xml:"ar_summary"`
}

// ParseQrstat reads `qrstat -ar ID -xml`: the reservations it shows, and
// the ids it does not know (qrstat exits 0 for those).
func ParseQrstat(out []byte, loc *time.Location) (ars []AR, unknown []string, err error) {
	var d qrstatDoc
	if err := xml.Unmarshal(out, &d); err != nil {
		return nil, nil, sshbatch.BadOutput("qrstat -xml", out, err.Error())
	}
	for _, u := range d.Unknown {
		unknown = append(unknown, strings.TrimSpace(u))
	}
	for _, r := range d.ARs {
		a := AR{ID: strings.TrimSpace(r.ID), Name: r.Name, Owner: r.Owner, State: strings.TrimSpace(r.State)}
		if !validResvID(a.ID) {
			return nil, nil, sshbatch.BadOutput("qrstat -xml", out, fmt.Sprintf("reservation id %q", a.ID))
		}
		if a.Start, err = time.ParseInLocation(XMLTimeLayout, strings.TrimSpace(r.Start), loc); err != nil {
			return nil, nil, sshbatch.BadOutput("qrstat -xml", out, fmt.Sprintf("reservation %s: start_time %q", a.ID, r.Start))
		}
		if a.End, err = time.ParseInLocation(XMLTimeLayout, strings.TrimSpace(r.End), loc); err != nil {
			return nil, nil, sshbatch.BadOutput("qrstat -xml", out, fmt.Sprintf("reservation %s: end_time %q", a.ID, r.End))
		}
		for _, g := range r.Granted {
			if g.Slots < 0 {
				return nil, nil, sshbatch.BadOutput("qrstat -xml", out, fmt.Sprintf("reservation %s: %d slots", a.ID, g.Slots))
			}
			a.Slots += g.Slots
			a.Instances = append(a.Instances, g.Queue)
		}
		ars = append(ars, a)
	}
	return ars, unknown, nil
}

// Message is a failed command's words on one line (stderr, else stdout).
func Message(r backends.Result) string {
	b := bytes.TrimSpace(r.Stderr)
	if len(b) == 0 {
		b = bytes.TrimSpace(r.Stdout)
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n", "; ")), " ")
}
