package slurm

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Sep separates the fields of the squeue and sinfo formats this package
// asks for: the ASCII unit separator, which no job name, comment, reason or
// node list contains in practice (job names are cleaned of control
// characters before submission).
const Sep = "\x1f"

// badOutput wraps ErrBadOutput with what was being parsed and the raw text,
// both cut: the detail may quote a line of any length.
var badOutput = sshbatch.BadOutput

// lines splits output into trimmed, non-empty lines.
var lines = sshbatch.Lines

var sbatchID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+)(?:;([A-Za-z0-9_.-]+))?$`) })

// ParseSbatch reads the output of `sbatch --parsable`: "id" or "id;cluster"
// on the last line, possibly after banner lines printed by site wrappers.
func ParseSbatch(out []byte) (id backends.JobID, cluster string, err error) {
	ls := lines(out)
	for i := len(ls) - 1; i >= 0; i-- {
		if m := sbatchID().FindStringSubmatch(strings.TrimSpace(ls[i])); m != nil {
			return backends.JobID(m[1]), m[2], nil
		}
	}
	return "", "", badOutput("sbatch --parsable", out, `no line of the form "<id>" or "<id>;<cluster>"`)
}

// MapState maps a SLURM job state (squeue %T, scontrol JobState, sacct
// State, jobcomp JobState; flags such as "CANCELLED by 1001" are ignored) to
// gridsub's State. Unknown states map to StateUnknown.
func MapState(s string) backends.State {
	s = strings.ToUpper(strings.TrimSpace(s))
	if i := strings.IndexAny(s, " +"); i >= 0 {
		s = s[:i]
	}
	switch s {
	case "PENDING", "PD", "CONFIGURING", "CF", "REQUEUED", "RQ", "REQUEUE_HOLD", "REQUEUE_FED",
		"RESV_DEL_HOLD", "RESIZING", "RS", "SUSPENDED", "S", "STOPPED", "ST":
		// A suspended or stopped job holds no progress but is not over.
		return backends.StatePending
	case "RUNNING", "R", "COMPLETING", "CG", "SIGNALING", "STAGE_OUT", "SO", "UPDATE_DB":
		return backends.StateRunning
	case "COMPLETED", "CD":
		return backends.StateCompleted
	case "FAILED", "F", "NODE_FAIL", "NF", "BOOT_FAIL", "BF", "OUT_OF_MEMORY", "OOM",
		"PREEMPTED", "PR", "SPECIAL_EXIT", "SE", "REVOKED", "RV":
		return backends.StateFailed
	case "CANCELLED", "CA":
		return backends.StateCancelled
	case "TIMEOUT", "TO", "DEADLINE", "DL":
		return backends.StateTimeout
	}
	return backends.StateUnknown
}

// SqueueFields are the squeue -O fields this package requests, in order.
// Every field has width 0 (never truncated) and ends with Sep; the free-text
// fields come last.
var SqueueFields = []string{"JobArrayID", "State", "Reason", "exit_code", "StartTime", "EndTime",
	"TimeLimit", "NumNodes", "NodeList", "Partition", "Comment", "Name"}

// SqueueFormat is the -O argument built from SqueueFields.
func SqueueFormat() string {
	parts := make([]string, len(SqueueFields))
	for i, f := range SqueueFields {
		parts[i] = f + ":0"
		if i < len(SqueueFields)-1 {
			parts[i] += Sep
		}
	}
	return strings.Join(parts, ",")
}

// QueueRecord is one line of the squeue format.
type QueueRecord struct {
	Status    backends.JobStatus
	RawState  string
	TimeLimit string
	Nodes     int
	Partition string
	Comment   string
	Name      string
}

// GridTag is the --comment value that tags a job with its grid id.
func GridTag(gridID string) string { return "gridsub:" + gridID }

// GridFromTag inverts GridTag ("" when comment is not a tag).
func GridFromTag(comment string) string {
	g, ok := strings.CutPrefix(comment, GridTag(""))
	if !ok {
		return ""
	}
	return g
}

// ParseSqueue reads `squeue -h -O <SqueueFormat()>` run with
// SLURM_TIME_FORMAT=%s.
func ParseSqueue(out []byte) ([]QueueRecord, error) {
	var recs []QueueRecord
	for _, l := range lines(out) {
		f := strings.SplitN(l, Sep, len(SqueueFields))
		if len(f) != len(SqueueFields) {
			return nil, badOutput("squeue", out, fmt.Sprintf("line %q has %d fields, want %d", l, len(f), len(SqueueFields)))
		}
		id := strings.TrimSpace(f[0])
		if !validJobID(id) {
			return nil, badOutput("squeue", out, fmt.Sprintf("bad job id %q", id))
		}
		st := MapState(f[1])
		if st == backends.StateUnknown {
			return nil, badOutput("squeue", out, fmt.Sprintf("unknown job state %q", f[1]))
		}
		r := QueueRecord{RawState: strings.TrimSpace(f[1]), TimeLimit: strings.TrimSpace(f[6]),
			Partition: strings.TrimSpace(f[9]), Comment: strings.TrimSpace(f[10]), Name: strings.TrimRight(f[11], " ")}
		r.Status = backends.JobStatus{ID: backends.JobID(id), State: st, Reason: strings.TrimSpace(f[2]),
			ExitCode: -1, NodeList: strings.TrimSpace(f[8])}
		r.Status.Name = r.Name
		r.Status.GridID = GridFromTag(r.Comment)
		if r.Status.GridID == "" {
			r.Status.GridID = elementTag(id, r.Comment)
		}
		if st.Final() {
			// squeue's exit_code is the raw wait status: code<<8 | signal.
			ws, err := strconv.Atoi(strings.TrimSpace(f[3]))
			if err != nil {
				return nil, badOutput("squeue", out, fmt.Sprintf("bad exit_code %q", f[3]))
			}
			r.Status.ExitCode, r.Status.Signal = ws>>8&0xff, ws&0x7f
		}
		r.Status.Start = epoch(f[4])
		r.Status.End = epoch(f[5])
		if n, err := strconv.Atoi(strings.TrimSpace(f[7])); err == nil && n >= 0 {
			r.Nodes = n
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// epoch reads a SLURM_TIME_FORMAT=%s time; "N/A", "Unknown", "None" and
// anything else non-numeric is the zero time.
func epoch(s string) time.Time {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

var kvKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|\s)([A-Z][A-Za-z0-9_:/]*)=`) })

// ParseKV reads one `key=value key=value` line as printed by scontrol -o and
// the jobcomp/filetxt log. Values may contain spaces (Reason, Command, Name):
// a value runs until the next " Key=" whose key starts with an upper-case
// letter. Duplicate keys keep the first value.
func ParseKV(line string) map[string]string {
	m := map[string]string{}
	idx := kvKey().FindAllStringSubmatchIndex(line, -1)
	for i, loc := range idx {
		key := line[loc[2]:loc[3]]
		end := len(line)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		if _, dup := m[key]; !dup {
			m[key] = strings.TrimSpace(line[loc[1]:end])
		}
	}
	return m
}

// parseExit reads "rc:sig" (rc 0..255, sig 0..127).
func parseExit(s string) (code, sig int, ok bool) {
	a, b, found := strings.Cut(strings.TrimSpace(s), ":")
	if !found {
		return 0, 0, false
	}
	c, err1 := strconv.Atoi(a)
	g, err2 := strconv.Atoi(b)
	return c, g, err1 == nil && err2 == nil && c >= 0 && c <= 255 && g >= 0 && g <= 127
}

// kvTime reads a scontrol/jobcomp time: epoch seconds (SLURM_TIME_FORMAT=%s)
// or the default ISO form, which is the controller's local time, read in loc.
func kvTime(s string, loc *time.Location) time.Time {
	if t := epoch(s); !t.IsZero() {
		return t
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(s), loc)
	if err != nil {
		return time.Time{}
	}
	return t
}

// jobFromKV builds a JobStatus from scontrol show job -o or jobcomp fields.
func jobFromKV(m map[string]string, loc *time.Location, what string, raw []byte) (backends.JobStatus, error) {
	id := m["JobId"]
	if !validJobID(id) {
		return backends.JobStatus{}, badOutput(what, raw, fmt.Sprintf("no valid JobId (got %q)", id))
	}
	st := MapState(m["JobState"])
	if st == backends.StateUnknown {
		return backends.JobStatus{}, badOutput(what, raw, fmt.Sprintf("unknown JobState %q", m["JobState"]))
	}
	js := backends.JobStatus{ID: backends.JobID(id), State: st, Reason: m["Reason"], ExitCode: -1,
		Start: kvTime(m["StartTime"], loc), End: kvTime(m["EndTime"], loc), NodeList: m["NodeList"], Name: m["JobName"]}
	if js.Name == "" {
		js.Name = m["Name"] // the jobcomp log's key
	}
	if js.NodeList == "(null)" {
		js.NodeList = ""
	}
	if g, ok := strings.CutPrefix(m["Comment"], "gridsub:"); ok {
		js.GridID = g
	}
	// An array element has a raw JobId of its own; it is known by its
	// array's id and its index ("12_5").
	if a, t := m["ArrayJobId"], m["ArrayTaskId"]; a != "" && a != "0" && validJobID(a) && t != "" && strings.Trim(t, "0123456789") == "" {
		js.ID = backends.JobID(a + "_" + t)
		if js.GridID == "" {
			js.GridID = elementTag(string(js.ID), m["Comment"])
		}
	}
	if st.Final() {
		if c, s, ok := parseExit(m["ExitCode"]); ok {
			js.ExitCode, js.Signal = c, s
		}
	}
	return js, nil
}

// ParseScontrolJobs reads `scontrol show job -o [id]`: one job per line.
func ParseScontrolJobs(out []byte, loc *time.Location) ([]backends.JobStatus, error) {
	var js []backends.JobStatus
	for _, l := range lines(out) {
		j, err := jobFromKV(ParseKV(l), loc, "scontrol show job", out)
		if err != nil {
			return nil, err
		}
		js = append(js, j)
	}
	return js, nil
}

// CompRecord is one line of the jobcomp/filetxt log.
type CompRecord struct {
	Status  backends.JobStatus
	Name    string
	WorkDir string
}

// ParseJobComp reads jobcomp/filetxt lines (`JobId=12 ... JobState=FAILED
// ... WorkDir=... ExitCode=3:0`). The log keeps no comment, so GridID is
// derived from a WorkDir ending in /gridsub/<grid id>[-<component>] by the
// caller. When an id appears twice (a recycled id after a reset), the last
// line wins.
func ParseJobComp(out []byte, loc *time.Location) ([]CompRecord, error) {
	var recs []CompRecord
	for _, l := range lines(out) {
		m := ParseKV(l)
		// Name is free text followed by JobState: re-cut it precisely.
		if i, j := strings.Index(l, " Name="), strings.Index(l, " JobState="); i >= 0 && j > i {
			m["Name"] = l[i+len(" Name=") : j]
		}
		st, err := jobFromKV(m, loc, "jobcomp log", out)
		if err != nil {
			return nil, err
		}
		recs = append(recs, CompRecord{Status: st, Name: m["Name"], WorkDir: m["WorkDir"]})
	}
	return recs, nil
}

// NodeRecord is one line of `sinfo -h -N -o <SinfoFormat>`: one node in one
// partition.
type NodeRecord struct {
	Node      string
	Partition string
	Default   bool
	CPUs      int
	State     string
	MemMiB    int64 // real memory (%m, MiB); 0 when not reported
	GPUs      int   // GPUs in the node's gres (%G, "gpu:2", "gpu:a100:4(S:0-1)"); 0 = none
}

// SinfoFormat lists node, partition (default marked "*"), CPUs, state,
// memory (MiB) and generic resources.
const SinfoFormat = "%N" + Sep + "%P" + Sep + "%c" + Sep + "%T" + Sep + "%m" + Sep + "%G"

// ParseSinfo reads `sinfo -h -N -o SinfoFormat` (or the older format
// without memory and gres: 4 fields).
func ParseSinfo(out []byte) ([]NodeRecord, error) {
	var recs []NodeRecord
	for _, l := range lines(out) {
		f := strings.Split(l, Sep)
		if len(f) != 4 && len(f) != 6 {
			return nil, badOutput("sinfo", out, fmt.Sprintf("line %q has %d fields, want 6", l, len(f)))
		}
		cpus, err := strconv.Atoi(strings.TrimSpace(f[2]))
		if err != nil || cpus < 0 {
			return nil, badOutput("sinfo", out, fmt.Sprintf("bad CPU count %q", f[2]))
		}
		p := strings.TrimSpace(f[1])
		r := NodeRecord{Node: strings.TrimSpace(f[0]), CPUs: cpus, State: strings.ToLower(strings.TrimSpace(f[3]))}
		r.Partition, r.Default = strings.CutSuffix(p, "*")
		if r.Node == "" || r.Partition == "" || strings.HasSuffix(r.Partition, "*") {
			return nil, badOutput("sinfo", out, fmt.Sprintf("bad node %q or partition %q", f[0], f[1]))
		}
		if len(f) == 6 {
			m := strings.TrimSuffix(strings.TrimSpace(f[4]), "+") // "64000+" in summaries
			if r.MemMiB, err = strconv.ParseInt(m, 10, 64); err != nil || r.MemMiB < 0 {
				return nil, badOutput("sinfo", out, fmt.Sprintf("bad memory %q", f[4]))
			}
			if r.GPUs, err = GresGPUs(f[5]); err != nil {
				return nil, badOutput("sinfo", out, err.Error())
			}
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil, badOutput("sinfo", out, "no nodes listed")
	}
	return recs, nil
}

// GresGPUs counts the GPUs of a node's gres list ("gpu:2",
// "gpu:a100:4(S:0-1),shard:8", "(null)" = none).
func GresGPUs(gres string) (int, error) {
	n := 0
	gres = strings.TrimSpace(gres)
	if gres == "" || gres == "(null)" {
		return 0, nil
	}
	for _, g := range strings.Split(gres, ",") {
		g, _, _ = strings.Cut(g, "(")
		w := strings.Split(g, ":")
		if w[0] != "gpu" {
			continue
		}
		c, err := strconv.Atoi(w[len(w)-1])
		if len(w) < 2 || err != nil || c < 0 {
			return 0, fmt.Errorf("bad gres %q", gres)
		}
		n += c
	}
	return n, nil
}

// NodeUsable reports whether a sinfo state (%T, lower case) can run jobs.
func NodeUsable(state string) bool {
	s := strings.TrimRight(state, "*~#!%$@^-")
	switch {
	case strings.HasPrefix(s, "down"), strings.HasPrefix(s, "drain"), strings.HasPrefix(s, "fail"),
		strings.HasPrefix(s, "maint"), strings.HasPrefix(s, "inval"), strings.HasPrefix(s, "unk"),
		strings.HasPrefix(s, "future"), strings.HasPrefix(s, "power"):
		return false
	}
	return true
}

// NodeTransient reports whether a sinfo state is one a node passes
// through while its controller or its slurmd restarts — "unknown", or
// "down"/"idle" and kin flagged '*' (not responding yet) — rather than a
// decision to take it out of service: such a node still counts in the
// site's size (not as free), so a site that is recovering does not report
// a capacity of zero.
func NodeTransient(state string) bool {
	s := strings.TrimRight(state, "~#!%$@^-")
	switch {
	case strings.HasPrefix(s, "unk"):
		return true
	case strings.HasSuffix(s, "*"):
		s = strings.TrimSuffix(s, "*")
		return !strings.HasPrefix(s, "drain") && !strings.HasPrefix(s, "maint") && !strings.HasPrefix(s, "fail") &&
			!strings.HasPrefix(s, "future") && !strings.HasPrefix(s, "inval")
	}
	return false
}

// NodeIdle reports whether a sinfo state means the node is free now.
func NodeIdle(state string) bool { return strings.TrimRight(state, "*~#!%$@^-") == "idle" }

var resvCreated = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`Reservation created: (\S+)`) })

// ParseReservationCreated reads `scontrol create reservation` output.
func ParseReservationCreated(out []byte) (backends.ResvID, error) {
	m := resvCreated().FindSubmatch(out)
	if m == nil {
		return "", badOutput("scontrol create reservation", out, `no "Reservation created: <name>"`)
	}
	return backends.ResvID(m[1]), nil
}

// ParseReservations reads `scontrol show reservation -o` (SLURM_TIME_FORMAT=%s
// or ISO times in loc).
func ParseReservations(out []byte, loc *time.Location) ([]backends.Reservation, error) {
	var rs []backends.Reservation
	for _, l := range lines(out) {
		m := ParseKV(l)
		name := m["ReservationName"]
		if name == "" {
			return nil, badOutput("scontrol show reservation", out, "a line without ReservationName")
		}
		n, err := strconv.Atoi(m["NodeCnt"])
		if err != nil || n < 0 {
			return nil, badOutput("scontrol show reservation", out, fmt.Sprintf("bad NodeCnt %q", m["NodeCnt"]))
		}
		r := backends.Reservation{ID: backends.ResvID(name), Start: kvTime(m["StartTime"], loc),
			End: kvTime(m["EndTime"], loc), Nodes: n, NodeList: m["Nodes"], State: m["State"]}
		if r.Start.IsZero() || r.End.IsZero() {
			return nil, badOutput("scontrol show reservation", out, "unreadable StartTime/EndTime")
		}
		if r.End.Before(r.Start) {
			return nil, badOutput("scontrol show reservation", out, "EndTime before StartTime")
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// configValue reads one "Key = value" line of `scontrol show config`.
func configValue(out []byte, key string) (string, bool) {
	for _, l := range lines(out) {
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// Message is what a SLURM command said on failure: stderr, else stdout,
// trimmed, without the "sbatch: error: " prefixes.
func Message(r backends.Result) string {
	b := bytes.TrimSpace(r.Stderr)
	if len(b) == 0 {
		b = bytes.TrimSpace(r.Stdout)
	}
	// Blanks are collapsed first: a "\r" must not hide a prefix, and
	// removing one must not leave another.
	s := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n", "; ")), " ")
	for strings.Contains(s, "sbatch: error: ") {
		s = strings.ReplaceAll(s, "sbatch: error: ", "")
	}
	return strings.TrimSpace(s)
}

var jobIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+(_[0-9]+)?$`) })

func validJobID(s string) bool { return jobIDRe().MatchString(s) }

// ParseSacct reads `sacct -X -n -P --format=JobIDRaw,State,ExitCode,Start,End`
// (SacctArgv): one status per line, the exit code only for a job that has
// ended.
func ParseSacct(out []byte) ([]backends.JobStatus, error) {
	var sts []backends.JobStatus
	for _, l := range lines(out) {
		f := strings.Split(l, "|")
		if len(f) != 5 || !validJobID(f[0]) {
			return nil, badOutput("sacct", out, fmt.Sprintf("line %q is not JobIDRaw|State|ExitCode|Start|End", l))
		}
		st := MapState(f[1])
		if st == backends.StateUnknown {
			return nil, badOutput("sacct", out, fmt.Sprintf("unknown state %q", f[1]))
		}
		js := backends.JobStatus{ID: backends.JobID(f[0]), State: st, ExitCode: -1, Reason: "from sacct",
			Start: epoch(f[3]), End: epoch(f[4])}
		if c, s, ok := parseExit(f[2]); ok && st.Final() {
			js.ExitCode, js.Signal = c, s
		}
		sts = append(sts, js)
	}
	return sts, nil
}
