package pbs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Every parser here is pure: bytes in, records out, no clock and no I/O.
// Unreadable output is an error wrapping backends.ErrBadOutput that quotes
// the text.

var badOutput = sshbatch.BadOutput

var lines = sshbatch.Lines

var (
	// jobIDRe: "12.server", "10[].server", "10[3].server".
	jobIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+(\[[0-9]*\])?\.[A-Za-z0-9][A-Za-z0-9._-]*$`) })
	// resvIDRe: "R16.server" or the short "R16" (also S<n> standing reservations).
	resvIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[RSM][0-9]+(\.[A-Za-z0-9][A-Za-z0-9._-]*)?$`) })
)

func validJobID(s string) bool  { return jobIDRe().MatchString(s) }
func validResvID(s string) bool { return resvIDRe().MatchString(s) }

// TagVar is the job variable that carries the grid tag.
const TagVar = "GRIDSUB_TAG"

// GridTag is the value of TagVar for a grid job: the grid id behind a
// letter prefix, so that PBS's JSON output, which turns number-like
// variable values into numbers ("007" -> 7, "1e5" -> 100000), never
// retypes it.
func GridTag(gridID string) string { return "g:" + gridID }

// GridFromTag inverts GridTag ("" when v is not a tag).
func GridFromTag(v string) string {
	g, ok := strings.CutPrefix(v, "g:")
	if !ok {
		return ""
	}
	return g
}

// ParseQsub reads qsub's stdout: the new job id alone on a line.
func ParseQsub(out []byte) (backends.JobID, error) {
	ls := lines(out)
	if len(ls) != 1 || !validJobID(strings.TrimSpace(ls[0])) {
		return "", badOutput("qsub", out, "want one job id such as 12.server")
	}
	return backends.JobID(strings.TrimSpace(ls[0])), nil
}

// JobRecord is one job as `qstat -f` prints it: its id, its attributes
// flattened to "name" / "Resource_List.walltime" with their values as
// text, and its Variable_List decoded.
type JobRecord struct {
	ID    backends.JobID
	Attrs map[string]string
	Vars  map[string]string
}

var dsvKeyRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*=`) })

// ParseDSV reads `qstat -f -F dsv [-x] <ids>`: one line per job,
// "Job Id: <id>|key=value|...", values verbatim. A '|' inside a value
// (PBS does not escape it) is kept: a piece that does not start with
// "key=" continues the value before it.
func ParseDSV(out []byte) ([]JobRecord, error) {
	var recs []JobRecord
	for _, l := range lines(out) {
		if l == historyMark {
			continue
		}
		parts := strings.Split(l, "|")
		id, ok := strings.CutPrefix(parts[0], "Job Id: ")
		if !ok || !validJobID(id) {
			return nil, badOutput("qstat -F dsv", out, fmt.Sprintf("line does not start with a job id: %.80q", l))
		}
		rec := JobRecord{ID: backends.JobID(id), Attrs: map[string]string{}}
		last := ""
		for _, p := range parts[1:] {
			if !dsvKeyRe().MatchString(p) {
				if last == "" {
					return nil, badOutput("qstat -F dsv", out, fmt.Sprintf("job %s: field %.80q is not key=value", id, p))
				}
				rec.Attrs[last] += "|" + p
				continue
			}
			k, v, _ := strings.Cut(p, "=")
			rec.Attrs[k] = v
			last = k
		}
		rec.Vars = ParseVariableList(rec.Attrs["Variable_List"])
		recs = append(recs, rec)
	}
	return recs, nil
}

// ParseVariableList splits the text form of Variable_List ("A=x\,y,B=")
// into its variables; "\," is a comma inside a value.
func ParseVariableList(s string) map[string]string {
	m := map[string]string{}
	if s == "" {
		return m
	}
	var cur strings.Builder
	flush := func() {
		if k, v, ok := strings.Cut(cur.String(), "="); ok {
			m[k] = v
		}
		cur.Reset()
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == ',':
			cur.WriteByte(',')
			i++
		case s[i] == ',':
			flush()
		default:
			cur.WriteByte(s[i])
		}
	}
	flush()
	return m
}

// jsonText renders a decoded JSON scalar as PBS's text form would show it
// (numbers as PBS printed them, booleans true/false, null as "null").
func jsonText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func decodeJSON(what string, out []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(out))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return nil, badOutput(what, out, "not a JSON object: "+err.Error())
	}
	return doc, nil
}

// ParseJobsJSON reads `qstat -f -F json [-x]` printed by either OpenPBS
// variant (the release tag and post-release master differ in layout and in
// how they type values; both decode here). Beware: with several ids PBS
// prints only the first job (openpbs issue #2672), so the backend never
// asks for several ids in JSON; without ids it lists every job. A document
// without "Jobs" (no job matched) is an empty list.
func ParseJobsJSON(out []byte) ([]JobRecord, error) {
	doc, err := decodeJSON("qstat -F json", out)
	if err != nil {
		return nil, err
	}
	if _, ok := doc["pbs_version"]; !ok {
		return nil, badOutput("qstat -F json", out, "no pbs_version: not qstat output")
	}
	raw, ok := doc["Jobs"]
	if !ok {
		return nil, nil
	}
	jobs, ok := raw.(map[string]any)
	if !ok {
		return nil, badOutput("qstat -F json", out, "Jobs is not an object")
	}
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, k int) bool { return lessID(ids[i], ids[k]) })
	recs := make([]JobRecord, 0, len(ids))
	for _, id := range ids {
		attrs, ok := jobs[id].(map[string]any)
		if !validJobID(id) || !ok {
			return nil, badOutput("qstat -F json", out, fmt.Sprintf("bad job entry %q", id))
		}
		rec := JobRecord{ID: backends.JobID(id), Attrs: map[string]string{}, Vars: map[string]string{}}
		for k, v := range attrs {
			switch x := v.(type) {
			case map[string]any:
				for sk, sv := range x {
					if k == "Variable_List" {
						rec.Vars[sk] = jsonText(sv)
					} else {
						rec.Attrs[k+"."+sk] = jsonText(sv)
					}
				}
			default:
				rec.Attrs[k] = jsonText(x)
			}
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// lessID orders job ids by their sequence number.
func lessID(a, b string) bool {
	na, _ := strconv.Atoi(a[:strings.IndexAny(a+".", ".[")])
	nb, _ := strconv.Atoi(b[:strings.IndexAny(b+".", ".[")])
	if na != nb {
		return na < nb
	}
	return a < b
}

// CtimeLayout is how PBS prints ctime, stime, obittime and reservation
// times: server local time, no zone.
const CtimeLayout = "Mon Jan _2 15:04:05 2006"

func pbsTime(s string, loc *time.Location) time.Time {
	t, err := time.ParseInLocation(CtimeLayout, strings.TrimSpace(s), loc)
	if err != nil {
		return time.Time{}
	}
	return t
}

// Exit_status values with a meaning of their own (PBS's JOB_EXEC_* codes
// are negative; a job killed by signal n has 256+n).
const (
	exitWalltime = -29 // JOB_EXEC_KILL_WALLTIME: killed at its walltime
	signalBase   = 256
)

// MapState maps PBS job_state letters: Q queued, H held, W waiting, T in
// transit, S suspended, M moved, R running, E exiting, B array begun, X
// subjob expired, F finished (history).
func MapState(s string) backends.State {
	switch s {
	case "Q", "H", "W", "T", "S", "U", "M":
		return backends.StatePending
	case "R", "E", "B":
		return backends.StateRunning
	case "F", "X":
		return backends.StateCompleted // refined by Status from Exit_status
	}
	return backends.StateUnknown
}

// Status turns a record into a JobStatus. A finished job is
//   - cancelled when it has no Exit_status (deleted before it ran) or was
//     terminated (substate 91: qdel, or its reservation ended or was deleted);
//   - timed out when Exit_status is -29 or the comment says it exceeded its walltime;
//   - completed with Exit_status 0, failed otherwise (256+n: killed by signal n).
func (r *JobRecord) Status(loc *time.Location) (backends.JobStatus, error) {
	a := r.Attrs
	st := MapState(a["job_state"])
	if st == backends.StateUnknown {
		return backends.JobStatus{}, fmt.Errorf("%w: job %s: unknown job_state %q", backends.ErrBadOutput, r.ID, a["job_state"])
	}
	js := backends.JobStatus{ID: r.ID, Name: a["Job_Name"], State: st, Reason: a["comment"], ExitCode: -1,
		GridID: r.GridID(), Start: pbsTime(a["stime"], loc), End: pbsTime(a["obittime"], loc),
		NodeList: a["exec_vnode"]}
	if !st.Final() {
		js.End = time.Time{}
		return js, nil
	}
	es, hasExit := a["Exit_status"]
	code, err := strconv.Atoi(es)
	if hasExit && err != nil {
		return backends.JobStatus{}, fmt.Errorf("%w: job %s: Exit_status %q is not a number", backends.ErrBadOutput, r.ID, es)
	}
	switch {
	case !hasExit:
		js.State = backends.StateCancelled
	case code == exitWalltime || strings.Contains(a["comment"], "exceeded resource walltime"):
		js.State, js.ExitCode = backends.StateTimeout, code
	case a["substate"] == "91":
		js.State, js.ExitCode = backends.StateCancelled, code
	case code == 0:
		js.State, js.ExitCode = backends.StateCompleted, 0
	default:
		js.State, js.ExitCode = backends.StateFailed, code
	}
	if code > signalBase && code < signalBase+128 {
		js.Signal = code - signalBase
	}
	return js, nil
}

// Node is one vnode from `pbsnodes -a -F json`.
type Node struct {
	Name     string
	State    string // e.g. "free", "job-busy", "down,offline"
	NCPUs    int    // resources_available.ncpus
	UsedCPUs int    // resources_assigned.ncpus (absent = 0)
	MemBytes int64  // resources_available.mem ("16gb"); 0 when absent
	NGPUs    int    // resources_available.ngpus (absent = 0)
	Jobs     []string
}

// ParseSize reads a PBS size ("16gb", "4194304kb", "512mb", "100", "2tw"
// is words and refused): bytes, ok.
func ParseSize(v string) (int64, bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40}, {"pb", 1 << 50}, {"b", 1}} {
		if strings.HasSuffix(v, u.suf) {
			v, mult = strings.TrimSuffix(v, u.suf), u.m
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

// Usable reports whether PBS may run jobs on the node.
func (n *Node) Usable() bool {
	for _, s := range strings.Split(n.State, ",") {
		switch strings.TrimSpace(s) {
		case "down", "offline", "unknown", "stale", "state-unknown", "unresolvable", "maintenance":
			return false
		}
	}
	return true
}

// Transient reports whether the node is out of use only for the moment
// its server or its MoM restarts ("state-unknown", "unknown", "stale"),
// not taken out of service ("offline", "maintenance") or down: it still
// counts in the site's size, not as free.
func (n *Node) Transient() bool {
	transient := false
	for _, s := range strings.Split(n.State, ",") {
		switch strings.TrimSpace(s) {
		case "unknown", "stale", "state-unknown":
			transient = true
		case "offline", "maintenance", "unresolvable":
			return false
		}
	}
	return transient
}

// Idle reports whether the node is usable and runs nothing.
func (n *Node) Idle() bool { return n.Usable() && n.UsedCPUs == 0 && len(n.Jobs) == 0 }

func intOf(v any) (int, bool) {
	switch x := v.(type) {
	case json.Number:
		i, err := strconv.Atoi(x.String())
		return i, err == nil
	case string:
		i, err := strconv.Atoi(x)
		return i, err == nil
	}
	return 0, false
}

// ParsePbsnodes reads `pbsnodes -a -F json` (either variant; root sees a
// few extra keys). A node entry that is not an object (PBS embeds "Unknown
// node" errors as values) is an error naming it.
func ParsePbsnodes(out []byte) ([]Node, error) {
	doc, err := decodeJSON("pbsnodes -F json", out)
	if err != nil {
		return nil, err
	}
	nodes, ok := doc["nodes"].(map[string]any)
	if !ok {
		return nil, badOutput("pbsnodes -F json", out, "no nodes object")
	}
	var res []Node
	for name, v := range nodes {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, badOutput("pbsnodes -F json", out, fmt.Sprintf("node %q: %s", name, jsonText(v)))
		}
		if len(m) == 1 {
			if s, isStr := m[name].(string); isStr {
				return nil, badOutput("pbsnodes -F json", out, fmt.Sprintf("node %q: %s", name, strings.TrimSpace(s)))
			}
		}
		n := Node{Name: name, State: jsonText(m["state"])}
		if ra, ok := m["resources_available"].(map[string]any); ok {
			n.NCPUs, _ = intOf(ra["ncpus"])
			n.NGPUs, _ = intOf(ra["ngpus"])
			if mem, ok := ra["mem"].(string); ok {
				n.MemBytes, _ = ParseSize(mem)
			}
		}
		if rs, ok := m["resources_assigned"].(map[string]any); ok {
			n.UsedCPUs, _ = intOf(rs["ncpus"])
		}
		if js, ok := m["jobs"].([]any); ok {
			for _, j := range js {
				n.Jobs = append(n.Jobs, jsonText(j))
			}
		}
		res = append(res, n)
	}
	sort.Slice(res, func(i, k int) bool { return res[i].Name < res[k].Name })
	return res, nil
}

// Server is what the backend reads from `qstat -B -f -F json`.
type Server struct {
	Name         string
	DefaultQueue string
	History      bool // job_history_enable
	Version      string
	MaxArraySize int // max_array_size: most subjobs in one array (DefaultMaxArraySize when not set)
}

// ParseServer reads `qstat -B -f -F json`.
func ParseServer(out []byte) (*Server, error) {
	doc, err := decodeJSON("qstat -B -f -F json", out)
	if err != nil {
		return nil, err
	}
	srv, ok := doc["Server"].(map[string]any)
	if !ok || len(srv) != 1 {
		return nil, badOutput("qstat -B -f -F json", out, "want exactly one entry in Server")
	}
	for name, v := range srv {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, badOutput("qstat -B -f -F json", out, "server entry is not an object")
		}
		maxArray := DefaultMaxArraySize
		if n, err := strconv.Atoi(jsonText(m["max_array_size"])); err == nil && n >= 0 {
			maxArray = n
		}
		return &Server{Name: name, DefaultQueue: jsonText(m["default_queue"]), MaxArraySize: maxArray,
			History: strings.EqualFold(jsonText(m["job_history_enable"]), "true"), Version: jsonText(doc["pbs_version"])}, nil
	}
	return nil, nil // unreachable
}

// Queue is one queue from `qstat -Q -f -F json`.
type Queue struct {
	Name      string
	Type      string // "Execution", "Route"
	Enabled   bool
	Started   bool
	IsResv    bool // a reservation's queue (has a reservation's acl, named R<n>)
	TotalJobs int
}

// ParseQueues reads `qstat -Q -f -F json`, sorted by name.
func ParseQueues(out []byte) ([]Queue, error) {
	doc, err := decodeJSON("qstat -Q -f -F json", out)
	if err != nil {
		return nil, err
	}
	qs, ok := doc["Queue"].(map[string]any)
	if !ok {
		return nil, badOutput("qstat -Q -f -F json", out, "no Queue object")
	}
	var res []Queue
	for name, v := range qs {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, badOutput("qstat -Q -f -F json", out, fmt.Sprintf("queue %q is not an object", name))
		}
		q := Queue{Name: name, Type: jsonText(m["queue_type"]), Enabled: jsonText(m["enabled"]) == "True",
			Started: jsonText(m["started"]) == "True", IsResv: validResvID(name)}
		q.TotalJobs, _ = intOf(m["total_jobs"])
		res = append(res, q)
	}
	sort.Slice(res, func(i, k int) bool { return res[i].Name < res[k].Name })
	return res, nil
}

// ParseRsub reads pbs_rsub's stdout: "<id> UNCONFIRMED" (always, without
// -I), or "<id> CONFIRMED" / "<id> DENIED" with -I.
func ParseRsub(out []byte) (backends.ResvID, string, error) {
	ls := lines(out)
	if len(ls) != 1 {
		return "", "", badOutput("pbs_rsub", out, "want one line <id> <state>")
	}
	f := strings.Fields(ls[0])
	if len(f) != 2 || !validResvID(f[0]) {
		return "", "", badOutput("pbs_rsub", out, "want <id> <state>")
	}
	switch f[1] {
	case "UNCONFIRMED", "CONFIRMED", "DENIED":
	default:
		return "", "", badOutput("pbs_rsub", out, "unknown state "+f[1])
	}
	return backends.ResvID(f[0]), f[1], nil
}

// ResvRecord is one reservation from `pbs_rstat -f`.
type ResvRecord struct {
	ID    backends.ResvID
	Attrs map[string]string
}

// ParseRstat reads `pbs_rstat -f`: "Resv ID: <id>" then unindented
// "key = value" lines, a blank line after each reservation. There is no
// JSON form (-F means "full"). No reservation = no output at all.
func ParseRstat(out []byte) ([]ResvRecord, error) {
	var res []ResvRecord
	var cur *ResvRecord
	last := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case strings.HasPrefix(l, "Resv ID: "):
			id := strings.TrimSpace(strings.TrimPrefix(l, "Resv ID: "))
			if !validResvID(id) {
				return nil, badOutput("pbs_rstat -f", out, fmt.Sprintf("bad reservation id %q", id))
			}
			res = append(res, ResvRecord{ID: backends.ResvID(id), Attrs: map[string]string{}})
			cur, last = &res[len(res)-1], ""
		case cur == nil:
			return nil, badOutput("pbs_rstat -f", out, fmt.Sprintf("line %.80q before any Resv ID", l))
		case strings.HasPrefix(l, "\t") && last != "":
			cur.Attrs[last] += strings.TrimPrefix(l, "\t") // a wrapped value
		default:
			k, v, ok := strings.Cut(l, " = ")
			if !ok {
				return nil, badOutput("pbs_rstat -f", out, fmt.Sprintf("line %.80q is not key = value", l))
			}
			cur.Attrs[k] = v
			last = k
		}
	}
	return res, nil
}

// ResvNodes counts the chunks of resv_nodes ("(vm:ncpus=2)+(vm2:ncpus=2)");
// 0 while the reservation is unconfirmed (PBS sets it only once confirmed).
func ResvNodes(s string) int {
	if strings.TrimSpace(s) == "" {
		return 0
	}
	return strings.Count(s, "+") + 1
}

// Reservation maps a record to backends.Reservation; State is PBS's
// reserve_state (RESV_UNCONFIRMED, RESV_CONFIRMED, RESV_RUNNING,
// RESV_BEING_DELETED, ...).
func (r *ResvRecord) Reservation(loc *time.Location) backends.Reservation {
	return backends.Reservation{ID: r.ID, Start: pbsTime(r.Attrs["reserve_start"], loc),
		End: pbsTime(r.Attrs["reserve_end"], loc), Nodes: ResvNodes(r.Attrs["resv_nodes"]),
		NodeList: r.Attrs["resv_nodes"], State: r.Attrs["reserve_state"]}
}

// Message is a command's error text on one line: stderr, else stdout.
func Message(r backends.Result) string {
	b := bytes.TrimSpace(r.Stderr)
	if len(b) == 0 {
		b = bytes.TrimSpace(r.Stdout)
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n", "; ")), " ")
}

// unknownJobRe matches qstat's and qdel's "Unknown Job Id <id>".
var unknownJobRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`Unknown Job Id (\S+)`) })

// UnknownJobIDs lists the ids qstat or qdel called unknown on stderr.
func UnknownJobIDs(stderr []byte) []string {
	var ids []string
	for _, m := range unknownJobRe().FindAllSubmatch(stderr, -1) {
		ids = append(ids, string(m[1]))
	}
	return ids
}

// Owner reports whether user owns the job (Job_Owner is <user>@<host>).
func (r *JobRecord) Owner(user string) bool {
	return strings.HasPrefix(r.Attrs["Job_Owner"], user+"@")
}

// ParseFullText reads the text form of `qstat -f`: "Job Id: <id>", then
// "    key = value" lines (four spaces), a long value continued on lines
// that start with a tab and are joined as they are (the break can fall
// inside a token), a blank line after each job. The records are those
// ParseDSV reads from the same jobs' DSV form (Variable_List's "\," is a
// comma inside a value). The backend asks for DSV (Cmds.StatusArgv); this
// reads the form PBS prints by default.
func ParseFullText(out []byte) ([]JobRecord, error) {
	var recs []JobRecord
	var cur *JobRecord
	last := ""
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case strings.TrimSpace(l) == "":
			last = ""
		case strings.HasPrefix(l, "Job Id: "):
			id := strings.TrimSpace(strings.TrimPrefix(l, "Job Id: "))
			if !validJobID(id) {
				return nil, badOutput("qstat -f", out, fmt.Sprintf("bad job id %q", id))
			}
			recs = append(recs, JobRecord{ID: backends.JobID(id), Attrs: map[string]string{}})
			cur, last = &recs[len(recs)-1], ""
		case cur == nil:
			return nil, badOutput("qstat -f", out, fmt.Sprintf("line %.80q before any Job Id", l))
		case strings.HasPrefix(l, "\t") && last != "":
			cur.Attrs[last] += strings.TrimPrefix(l, "\t")
		case strings.HasPrefix(l, "    "):
			k, v, ok := strings.Cut(strings.TrimPrefix(l, "    "), " = ")
			if !ok || !dsvKeyRe().MatchString(k+"=") {
				return nil, badOutput("qstat -f", out, fmt.Sprintf("line %.80q is not key = value", l))
			}
			cur.Attrs[k] = v
			last = k
		default:
			return nil, badOutput("qstat -f", out, fmt.Sprintf("line %.80q is neither a job id nor an attribute", l))
		}
	}
	for i := range recs {
		recs[i].Vars = ParseVariableList(recs[i].Attrs["Variable_List"])
	}
	return recs, nil
}
