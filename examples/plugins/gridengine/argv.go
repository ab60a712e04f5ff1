package gridengine

import (
	"bytes"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// Every builder returns an argv: separate words that the Runner delivers
// literally (the transport quotes them), so nothing a user wrote is ever
// interpreted by the remote shell. The scripts are constants that take
// their data as positional parameters. Grid Engine's commands are named by
// their full path in the configured bin directory.

// DefaultBinDir is where Debian's gridengine-client puts qsub, qstat, ...
const DefaultBinDir = "/usr/bin"

// IDFile is the file in a job directory that records the job's number:
// FindByGridID finds a job the qmaster and qacct have forgotten by it.
const IDFile = ".gridsub-jobid"

// CancelledDir, under the remote directory, holds one empty file per job
// gridsub deleted (named by the job number): Grid Engine keeps no record
// of a pending job deleted with qdel, and its accounting does not tell a
// qdel from another kill. Grid ids never start with '.', so no job
// directory is named so.
const CancelledDir = "gridsub/.cancelled" // beside IndexDir: submitScript finds it from there

// Cmds names the Grid Engine client commands by absolute path.
type Cmds struct{ Bin string }

func (c Cmds) cmd(name string) string {
	bin := c.Bin
	if bin == "" {
		bin = DefaultBinDir
	}
	return path.Join(bin, name)
}

// IndexDir, under the remote directory, holds one file per job gridsub
// submitted, named by the job number and holding its grid id: qstat -xml
// does not show a job's variables, and the status command reads the grid
// ids of the jobs it reports from here. Grid ids never start with '.', so
// no job directory is named so.
const IndexDir = "gridsub/.ids"

// submitScript runs at the login node as `bash -c submitScript
// gridsub-submit <qsub> <qrstat> <jobdir> <index dir> <grid id> <h_rt
// seconds> <reservation or ""> <its end in Unix seconds or ""> <qsub
// options...>` with the wrapper on stdin: it makes the job directory,
// stores the wrapper there, submits it with the directory as the job's
// working directory and its output files there, records the job number in
// IDFile and the grid id under the index (removing a cancel marker a
// wrapped-around job number may have left), and prints the job number. A job
// in an advance reservation gets at most the reservation's remaining time
// as h_rt: Grid Engine refuses a job that would outlast the reservation,
// where SLURM and PBS end it at the reservation's end. The end is the one
// given, else qrstat's (in the same command); a reservation qrstat does
// not show is left to qsub to refuse.
const submitScript = `set -e; q=$1; qr=$2; d=$3; ix=$4; g=$5; rt=$6; ar=$7; e=$8; shift 8; ` +
	`if [ -n "$ar" ]; then if [ -z "$e" ]; then e=$("$qr" -ar "$ar" -xml </dev/null | sed -n 's/.*<end_time>\([-0-9T:]*\)<\/end_time>.*/\1/p'); ` +
	`[ -z "$e" ] || e=$(date -d "$e" +%s); fi; ` +
	`if [ -n "$e" ]; then l=$(( e - $(date +%s) - 1 )); [ "$l" -ge "$rt" ] || rt=$(( l > 0 ? l : 1 )); fi; set -- "$@" -ar "$ar"; fi; ` +
	`mkdir -p -- "$ix" "$d"; ix=$(cd -- "$ix" && pwd); cd -- "$d"; cat > ` + sshbatch.ScriptFile + `; chmod 0700 ` + sshbatch.ScriptFile +
	`; id=$("$q" -terse -wd "$PWD" -o "$PWD/` + sshbatch.StdoutFile + `" -e "$PWD/` + sshbatch.StderrFile + `" -l "h_rt=$rt" "$@" ` + sshbatch.ScriptFile +
	`); id=${id%%.*}; printf '%s\n' "$id" > ` + IDFile + `; printf '%s\n' "$g" > "$ix/$id"; rm -f -- "$ix/../.cancelled/$id"; printf '%s\n' "$id"`

// CleanName makes a job or reservation name Grid Engine accepts: letters,
// digits, '.', '_' and '-' are kept, anything else becomes '_', a name not
// starting with a letter gets a "g" before it, and the result is at most
// 200 bytes. The name is a label only: the grid tag identifies the job.
func CleanName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if n == "" || !(n[0] >= 'a' && n[0] <= 'z' || n[0] >= 'A' && n[0] <= 'Z') {
		n = "g" + n
	}
	if len(n) > 200 {
		n = n[:200]
	}
	return n
}

// Seconds is a limit in whole seconds, rounded up, at least 1 (h_rt=).
func Seconds(d time.Duration) string {
	return strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
}

// Shape is how a job's nodes become Grid Engine slots: a gridsub node is
// SlotsPerNode slots of the site (Grid Engine schedules slots, not nodes).
type Shape struct {
	SlotsPerNode int
	PE           string // the parallel environment of multi-slot jobs ("" = none: such jobs are refused)
}

// Slots is the slots a spec asks for: Nodes times its cores per node (the
// site's slots per node when it names none).
func (s Shape) Slots(spec *backends.JobSpec) int {
	per := spec.CoresPerNode
	if per == 0 {
		per = max(s.SlotsPerNode, 1)
	}
	return spec.Nodes * per
}

// QsubArgs builds the qsub options for spec but those submitScript adds
// (-terse, -wd, -o/-e, h_rt, -ar, the script): name, the grid tag, not
// rerunnable (Grid Engine must not run a job a second time behind
// gridsub's back), bash as the shell, "verify: refuse a job that can never
// run" (-w e), the slots through the parallel environment, memory per slot
// (h_vmem: the node's memory shared among its slots, in whole MiB rounded
// up), queue and project.
func QsubArgs(spec *backends.JobSpec, shape Shape, queue, project string) []string {
	name := spec.Name
	if name == "" {
		name = spec.GridID
	}
	a := []string{"-N", CleanName(name), "-v", TagVar + "=" + GridTag(spec.GridID), "-r", "n", "-S", "/bin/bash", "-w", "e"}
	slots := shape.Slots(spec)
	if slots > 1 {
		a = append(a, "-pe", shape.PE, strconv.Itoa(slots))
	}
	if spec.MemPerNode > 0 {
		per := max(slots/spec.Nodes, 1)
		mib := (spec.MemPerNode/int64(per) + 1<<20 - 1) >> 20
		a = append(a, "-l", "h_vmem="+strconv.FormatInt(max(mib, 1), 10)+"M")
	}
	if spec.Partition != "" {
		queue = spec.Partition
	}
	if queue != "" {
		a = append(a, "-q", queue)
	}
	if spec.Account != "" {
		project = spec.Account
	}
	if project != "" {
		a = append(a, "-P", project)
	}
	return a
}

// SubmitArgv is the one remote command of spec's submission from jobDir
// (submitScript); the wrapper goes on its stdin. resvEnd is the end of
// spec's reservation when known (zero: qrstat is asked).
func (c Cmds) SubmitArgv(jobDir, indexDir string, spec *backends.JobSpec, resvEnd time.Time, qsubArgs []string) []string {
	end := ""
	if spec.Reservation != "" && !resvEnd.IsZero() {
		end = strconv.FormatInt(resvEnd.Unix(), 10)
	}
	return append([]string{"bash", "-c", submitScript, "gridsub-submit", c.cmd("qsub"), c.cmd("qrstat"), jobDir, indexDir, spec.GridID,
		Seconds(spec.Walltime), spec.Reservation, end}, qsubArgs...)
}

// statusScript answers for many ids in one remote command and one qmaster
// request: `bash -c statusScript gridsub-status <qstat> <qacct> <user>
// <cancelled dir> <index dir> <ids...>` (an id is a job number or an array
// task "<job>.<task>") prints the user's live jobs (qstat -xml), then
// acctMark and the accounting records of the ids that are not live, then
// cancelledMark and those of them gridsub deleted, then tagsMark and
// "<job>:<grid id or array tag>" of the ids' job numbers the index has
// (one grep over their files). An array task is live when a qstat entry of
// its job lists it (a running task alone, pending ones as "8,9,11-19:1");
// the ids reach awk through its environment.
//
// The accounting records come from the accounting file, not the qmaster.
// qacct -j '*' parses the whole file, whose size grows with the site's
// history (100,000 records: 4-7 s here), so the script reads the file
// backwards (tac) and hands qacct only the newest line of each id asked
// for (job number field 6, task field 36: 0 for a plain job), stopping
// once every id has one: a poll of jobs that just ended reads the file's
// tail only, a poll of an id without a record reads the file once with
// awk (100,000 records: about 1 s). Where the file is not at
// $SGE_ROOT/$SGE_CELL/common/accounting or not readable, qacct -j '*'
// reads it whole. Without accounting qacct prints nothing and the
// Backend reads the jobs' exit-code files. Globbing is off.
const statusScript = `set -f; qs=$1; qa=$2; u=$3; m=$4; ix=$5; shift 5; x=$("$qs" -xml -u "$u") || exit; printf '%s\n' "$x"; ` +
	`miss=$(printf '%s\n' "$x" | I="$*" awk ` +
	`'BEGIN { k = split(ENVIRON["I"], a, " "); for (i = 1; i <= k; i++) { split(a[i], q, "."); w[q[1]] = w[q[1]] " " a[i] } } ` +
	`/<JB_job_number>/ { n = $0; gsub(/.*<JB_job_number>|<\/JB_job_number>.*/, "", n); t = ""; next } ` +
	`/<tasks>/ { t = $0; gsub(/.*<tasks>|<\/tasks>.*/, "", t); next } ` +
	`/<\/job_list>/ { if (n in w) { if (t == "") live[n] = 1; else { c = split(w[n], e, " "); np = split(t, p, ","); ` +
	`for (i = 1; i <= c; i++) { split(e[i], q, "."); for (j = 1; j <= np; j++) { if (split(p[j], r, "[-:]") == 3) { ` +
	`if (q[2] + 0 >= r[1] + 0 && q[2] + 0 <= r[2] + 0 && r[3] + 0 > 0 && (q[2] - r[1]) % r[3] == 0) live[e[i]] = 1 } else if (q[2] + 0 == p[j] + 0) live[e[i]] = 1 } } } } n = "" } ` +
	`END { for (i = 1; i <= k; i++) if (!(a[i] in live)) print a[i] }'); ` +
	`echo '` + acctMark + `'; if [ -n "$miss" ]; then af=${SGE_ROOT:-/var/lib/gridengine}/${SGE_CELL:-default}/common/accounting; ` +
	`if [ -f "$af" ] && [ -r "$af" ]; then "$qa" -f <(tac -- "$af" | W="$miss" awk -F: ` +
	`'BEGIN { n = split(ENVIRON["W"], a, " "); for (i = 1; i <= n; i++) w[a[i]] = 1; left = n } ` +
	`{ k = ($36 == 0 ? $6 : $6 "." $36) } (k in w) { print; delete w[k]; if (--left == 0) exit }') -j '*'; ` +
	`else "$qa" -j '*'; fi 2>/dev/null | W="$miss" awk ` +
	`'BEGIN { n = split(ENVIRON["W"], a); for (i = 1; i <= n; i++) w[a[i]] = 1 } ` +
	`function out() { if (b != "" && (t == "undefined" ? (j in w) : ((j "." t) in w))) printf "%s", b } ` +
	`/^=+$/ { out(); b = $0 "\n"; j = ""; t = ""; next } { b = b $0 "\n" } $1 == "jobnumber" { j = $2 } $1 == "taskid" { t = $2 } END { out() }'; fi; ` +
	`echo '` + cancelledMark + `'; for i in $miss; do [ -e "$m/$i" ] && printf '%s\n' "$i"; done; ` +
	`echo '` + tagsMark + `'; cd -- "$ix" 2>/dev/null && grep -s -m 1 -H '' -- $(printf '%s\n' "$@" | sed 's/[.].*//' | sort -u); exit 0`

// StatusArgv asks for ids (valid job numbers) as the login user.
func (c Cmds) StatusArgv(user, cancelledDir, indexDir string, ids []backends.JobID) []string {
	a := []string{"bash", "-c", statusScript, "gridsub-status", c.cmd("qstat"), c.cmd("qacct"), user, cancelledDir, indexDir}
	for _, id := range ids {
		a = append(a, string(id))
	}
	return a
}

// tagLines lists the user's jobs with their tags (the first part of
// tagScript and findScript, $1 = qstat, $2 = user): of `qstat -u USER -j
// '*'` (one qmaster request) it keeps the lines ParseTagged reads (an
// array job's tasks among them). No job is exit 1 with "Following jobs do
// not exist"; any other failure (the qmaster down) is qstat's exit status
// with its words on stderr, never an empty listing (which would say no job
// carries the tag).
const tagLines = `o=$("$1" -u "$2" -j '*' 2>&1); r=$?; if [ $r -ne 0 ] && ! printf '%s\n' "$o" | grep -q '^Following jobs do not exist'; then ` +
	`printf '%s\n' "$o" >&2; exit $r; fi; printf '%s\n' "$o" | awk '/^(job_number|owner|cwd|job_name|env_list|job-array tasks):/ || /^Following jobs do not exist/'; `

// tagScript: `bash -c tagScript gridsub-tags <qstat> <user>` (tagLines).
const tagScript = tagLines + `exit 0`

// TagsArgv lists the user's live jobs with their tags.
func (c Cmds) TagsArgv(user string) []string {
	return []string{"bash", "-c", tagScript, "gridsub-tags", c.cmd("qstat"), user}
}

// idFileLines prints "<dir>:<id>" for each of a grid job's directories
// holding an id file ($3 = the remote directory, $4 = the grid id,
// checked by sshbatch.ValidGridID before, quoted here).
const idFileLines = `cd -- "$3" 2>/dev/null || exit 0; for f in gridsub/"$4"/` + IDFile + ` gridsub/"$4"-*/` + IDFile +
	`; do [ -f "$f" ] && [ ! -L "$f" ] && printf '%s:%s\n' "${f%/*}" "$(head -c 64 -- "$f")"; done; exit 0`

// idFilesMark separates findScript's two parts.
const idFilesMark = "#gridsub-idfiles"

// findScript is what Find asks in one command: `bash -c findScript
// gridsub-find <qstat> <user> <remote dir> <grid id>` prints the tag
// listing (tagLines), idFilesMark, then the id files of the grid job's
// directories (idFileLines).
const findScript = tagLines + `echo '` + idFilesMark + `'; ` + idFileLines

// FindArgv lists the user's live jobs with their tags and the id files of
// gridID's job directories, in one command.
func (c Cmds) FindArgv(user, remoteDir, gridID string) []string {
	return []string{"bash", "-c", findScript, "gridsub-find", c.cmd("qstat"), user, remoteDir, gridID}
}

// SplitFind cuts findScript's output into the tag listing and the id
// file lines.
func SplitFind(out []byte) (tags, idFiles []byte, err error) {
	tags, idFiles, ok := bytes.Cut(out, []byte(idFilesMark+"\n"))
	if !ok {
		return nil, nil, sshbatch.BadOutput("qstat -j", out, "no "+idFilesMark+" line")
	}
	return tags, idFiles, nil
}

// ParseIDFiles reads idFileLines' "<dir>:<id>" lines; a line whose id
// is not a job number is skipped.
func ParseIDFiles(out []byte) map[string]backends.JobID {
	m := map[string]backends.JobID{}
	for _, l := range sshbatch.Lines(out) {
		i := strings.LastIndexByte(l, ':')
		if i < 0 {
			continue
		}
		if id := strings.TrimSpace(l[i+1:]); validJobOrTask(id) {
			m[l[:i]] = backends.JobID(id)
		}
	}
	return m
}

// cancelScript deletes one job or array task and, once qdel accepted,
// leaves its marker: `bash -c cancelScript gridsub-cancel <qdel>
// <cancelled dir> <marker name> <qdel arguments...>`. A refusal is qdel's
// exit status with its words on stderr.
const cancelScript = `q=$1; m=$2; n=$3; shift 3; o=$("$q" "$@" 2>&1); r=$?; if [ $r -ne 0 ]; then printf '%s\n' "$o" >&2; exit $r; fi; ` +
	`mkdir -p -- "$m" && : > "$m/$n"; printf '%s\n' "$o"`

// CancelArgv deletes one job (qdel N) or one array task (qdel N -t T)
// and records that gridsub deleted it.
func (c Cmds) CancelArgv(cancelledDir string, id backends.JobID) []string {
	a := []string{"bash", "-c", cancelScript, "gridsub-cancel", c.cmd("qdel"), cancelledDir, string(id)}
	if job, task, ok := SplitTaskID(string(id)); ok {
		return append(a, job, "-t", strconv.Itoa(task))
	}
	return append(a, string(id))
}

// infoScript prints the site's hosts, queues, slots and jobs in one remote
// command: `bash -c infoScript gridsub-info <qhost> <qconf> <qstat>`.
const infoScript = `set -e; "$1" -xml; echo '` + queuesMark + `'; "$2" -sql; echo '` + slotsMark + `'; "$3" -g c; echo '` + jobsMark + `'; "$3" -u '*' -xml`

const (
	queuesMark = "#gridsub-queues"
	slotsMark  = "#gridsub-slots"
	jobsMark   = "#gridsub-jobs"
)

// InfoArgv asks for qhost -xml, qconf -sql, qstat -g c and every user's
// jobs (qstat -u '*' -xml) in one command.
func (c Cmds) InfoArgv() []string {
	return []string{"bash", "-c", infoScript, "gridsub-info", c.cmd("qhost"), c.cmd("qconf"), c.cmd("qstat")}
}

// QrsubTimeLayout is qrsub -a's [[CC]YY]MMDDhhmm[.SS] in the qmaster's zone.
const QrsubTimeLayout = "200601021504.05"

// QrsubArgv reserves slots (through the parallel environment when more
// than one) in queue from start (omitted: now) for d, for users (qrsub
// -u: who may submit into it).
func (c Cmds) QrsubArgv(name string, start time.Time, loc *time.Location, d time.Duration, slots int, pe, queue string, users []string) []string {
	a := []string{c.cmd("qrsub"), "-N", CleanName(name)}
	if !start.IsZero() {
		a = append(a, "-a", start.In(loc).Format(QrsubTimeLayout))
	}
	a = append(a, "-d", Seconds(d))
	if slots > 1 {
		a = append(a, "-pe", pe, strconv.Itoa(slots))
	}
	if queue != "" {
		a = append(a, "-q", queue)
	}
	if len(users) > 0 {
		a = append(a, "-u", strings.Join(users, ","))
	}
	return a
}

// QrstatArgv shows one reservation.
func (c Cmds) QrstatArgv(id backends.ResvID) []string {
	return []string{c.cmd("qrstat"), "-ar", string(id), "-xml"}
}

// QrdelArgv deletes one reservation.
func (c Cmds) QrdelArgv(id backends.ResvID) []string { return []string{c.cmd("qrdel"), string(id)} }
