package pbs

import (
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// Every builder returns an argv: separate words that the Runner delivers
// literally (the transport quotes them), so nothing a user wrote is ever
// interpreted by the remote shell. PBS commands are named by their full
// path in the configured bin directory: a login PATH may put another batch
// system's qsub/qstat/qdel first (the fixtures' machine got Grid Engine's).

// DefaultBinDir is where OpenPBS installs its client commands.
const DefaultBinDir = "/opt/pbs/bin"

// Cmds names the PBS client commands by absolute path.
type Cmds struct{ Bin string }

func (c Cmds) cmd(name string) string {
	bin := c.Bin
	if bin == "" {
		bin = DefaultBinDir
	}
	return path.Join(bin, name)
}

// submitScript runs at the login node as `bash -c submitScript
// gridsub-submit <qsub> <jobdir> <qsub options...>` with the wrapper on
// stdin: it creates the job directory, stores the wrapper there, submits it
// from there (so PBS_O_WORKDIR is the job directory), records the id in
// .gridsub-jobid (found again by FindByGridID when PBS keeps no history)
// and prints the id, all in one remote command.
const submitScript = `set -e; q=$1; d=$2; shift 2; mkdir -p -- "$d"; cd -- "$d"; cat > ` + ScriptFile + `; chmod 0700 ` + ScriptFile +
	`; id=$("$q" -o "$PWD/` + StdoutFile + `" -e "$PWD/` + StderrFile + `" "$@" ` + ScriptFile + `); printf '%s\n' "$id" > ` + IDFile + `; printf '%s\n' "$id"`

// CleanName makes a job name qsub accepts (it refuses whitespace and most
// punctuation): letters, digits, '.', '_' and '-' are kept, anything else
// becomes '_', a name not starting with a letter or digit gets a "g"
// before it, and the result is at most 200 bytes. The name is a label
// only: the grid tag identifies the job.
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
	if n == "" || !isAlnum(n[0]) {
		n = "g" + n
	}
	if len(n) > 200 {
		n = n[:200]
	}
	return n
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Walltime formats a limit as PBS's HH:MM:SS, rounded up to the second.
func Walltime(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	s = max(s, 1)
	return strconv.FormatInt(s/3600, 10) + ":" + pad2(s/60%60) + ":" + pad2(s%60)
}

func pad2(v int64) string {
	if v < 10 {
		return "0" + strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10)
}

// ResvQueue is the queue of a reservation: "R16" for "R16.server".
func ResvQueue(id string) string {
	q, _, _ := strings.Cut(id, ".")
	return q
}

// Select is the resource request for nodes whole nodes of cpn CPUs each
// (exclusive, one chunk per host) or, with cores > 0, nodes chunks of
// cores CPUs on distinct hosts.
func Select(nodes, cores, cpn int) []string {
	if cores > 0 {
		return []string{"-l", "select=" + strconv.Itoa(nodes) + ":ncpus=" + strconv.Itoa(cores), "-l", "place=scatter"}
	}
	return []string{"-l", "select=" + strconv.Itoa(nodes) + ":ncpus=" + strconv.Itoa(max(cpn, 1)), "-l", "place=scatter:excl"}
}

// QsubArgs builds the qsub options for spec (without -o/-e and the script):
// name, the grid tag, not rerunnable (PBS must not run a job a second time
// behind gridsub's back), resources, walltime and queue. cpn is the site's
// CPUs per node, used when spec asks for whole nodes.
func QsubArgs(spec *backends.JobSpec, queue string, cpn int) []string {
	name := spec.Name
	if name == "" {
		name = spec.GridID
	}
	a := []string{"-N", CleanName(name), "-v", TagVar + "=" + GridTag(spec.GridID), "-r", "n"}
	sel := Select(spec.Nodes, spec.CoresPerNode, cpn)
	if spec.MemPerNode > 0 { // per chunk, i.e. per node: in whole MiB, rounded up
		sel[1] += ":mem=" + strconv.FormatInt((spec.MemPerNode+1<<20-1)>>20, 10) + "mb"
	}
	if spec.GPUsPerNode > 0 {
		sel[1] += ":ngpus=" + strconv.Itoa(spec.GPUsPerNode)
	}
	a = append(a, sel...)
	a = append(a, "-l", "walltime="+Walltime(spec.Walltime))
	if spec.Account != "" {
		a = append(a, "-A", spec.Account)
	}
	if spec.Partition != "" {
		queue = spec.Partition
	}
	if spec.Reservation != "" {
		queue = ResvQueue(spec.Reservation)
	}
	if queue != "" {
		a = append(a, "-q", queue)
	}
	return a
}

// SubmitArgv is the one remote command of a submission; the wrapper goes on
// its stdin.
func (c Cmds) SubmitArgv(jobDir string, qsubArgs []string) []string {
	return append([]string{"bash", "-c", submitScript, "gridsub-submit", c.cmd("qsub"), jobDir}, qsubArgs...)
}

// DirectStatusMax is the most ids StatusArgv asks qstat for by id: qstat
// makes one server request per id asked for (measured on the testbed: 100
// finished ids 2.7-3.8 s, every job of the server without ids 0.26 s), so
// more ids are answered from the id-less listing.
const DirectStatusMax = 8

// statusScript answers for many ids in one remote command: `bash -c
// statusScript gridsub-status <qstat> <ids...>` prints every live job of
// the server in DSV (one request), then "#gridsub-history", then the jobs
// among ids that are not live, by id, with -x (finished since the last
// poll: few). Globbing is off ("10[].server" stays literal).
const statusScript = `set -f; q=$1; shift; a=$("$q" -t -f -F dsv) || exit; [ -z "$a" ] || printf '%s\n' "$a"; echo '` + historyMark + `'; ` +
	`m=$(printf '%s\n' "$a" | sed -n 's/^Job Id: \([^|]*\)|.*/\1/p' | grep -vxF -f - <(printf '%s\n' "$@")); [ -z "$m" ] || exec "$q" -x -f -F dsv $m`

// historyMark separates statusScript's two listings.
const historyMark = "#gridsub-history"

// StatusArgv asks for the given jobs, finished ones included (-x), in the
// DSV form: unlike the JSON form it prints every id asked for (with several
// ids `qstat -f -F json` prints only the first, openpbs #2672), and its
// values are verbatim (JSON retypes number-like ones). Unknown ids are
// reported on stderr (exit 153) and skipped. Up to DirectStatusMax ids it
// is one qstat by id; beyond, statusScript: still one remote command.
func (c Cmds) StatusArgv(ids []backends.JobID) []string {
	var a []string
	if len(ids) <= DirectStatusMax {
		a = []string{c.cmd("qstat"), "-x", "-f", "-F", "dsv"}
	} else {
		a = []string{"bash", "-c", statusScript, "gridsub-status", c.cmd("qstat")}
	}
	for _, id := range ids {
		a = append(a, string(id))
	}
	return a
}

// findScript prints in DSV the jobs of a user that carry a tag, finished
// ones included: `bash -c findScript gridsub-find <qstat> <TagVar=tag>
// <user>`. It asks the server once for every job it knows, live and
// history, with no ids (qstat makes one server request per id asked for:
// by id, the user's whole history took 8 s for 323 jobs on the testbed
// and minutes for thousands; without ids 0.3 s), and keeps on the server
// side only the lines holding both the owner and the tag variable as a
// whole word of Variable_List (followed by ',', '|' or the line's end),
// so what comes back is a few lines at any history length. The values
// reach awk through its environment (no escape processing, no code); the
// caller still checks both on the parsed records. qstat's failure is the
// script's (pipefail).
const findScript = `set -o pipefail; "$1" -x -t -f -F dsv | T="$2" U="|Job_Owner=$3@" awk ` +
	`'index($0, ENVIRON["U"]) && (index($0, ENVIRON["T"] ",") || index($0, ENVIRON["T"] "|") || ` +
	`substr($0, length($0) - length(ENVIRON["T"]) + 1) == ENVIRON["T"])'`

// FindArgv lists in DSV, in one command and one server request, the jobs
// of user (in any state) whose Variable_List holds TagVar=tag.
func (c Cmds) FindArgv(user, tag string) []string {
	return []string{"bash", "-c", findScript, "gridsub-find", c.cmd("qstat"), TagVar + "=" + tag, user}
}

// LiveDSVArgv lists every live job of the server in DSV (no ids: one
// server request, 0.2–0.3 s for hundreds of jobs on the testbed), for
// finding the jobs of a cut batch by their tags.
func (c Cmds) LiveDSVArgv() []string { return []string{c.cmd("qstat"), "-t", "-f", "-F", "dsv"} }

// ActiveJSONArgv lists every live job (no ids: the JSON form then prints
// them all), for Info.
func (c Cmds) ActiveJSONArgv() []string { return []string{c.cmd("qstat"), "-f", "-F", "json"} }

// NodesArgv lists every vnode.
func (c Cmds) NodesArgv() []string { return []string{c.cmd("pbsnodes"), "-a", "-F", "json"} }

// ServerArgv shows the server's attributes.
func (c Cmds) ServerArgv() []string { return []string{c.cmd("qstat"), "-B", "-f", "-F", "json"} }

// QueuesArgv shows every queue.
func (c Cmds) QueuesArgv() []string { return []string{c.cmd("qstat"), "-Q", "-f", "-F", "json"} }

// QdelArgv deletes one job (qdel under-reports errors for several ids).
func (c Cmds) QdelArgv(id backends.JobID) []string { return []string{c.cmd("qdel"), string(id)} }

// RsubTimeLayout is pbs_rsub -R's [[CC]YY]MMDDhhmm[.SS] in the server's time zone.
const RsubTimeLayout = "200601021504.05"

// RsubArgv asks for r.Nodes whole nodes of cpn CPUs from start for
// r.Duration, waiting up to wait for the scheduler's decision (-I): the
// output is then "<id> CONFIRMED", "<id> DENIED" or, when the scheduler did
// not decide in time, "<id> UNCONFIRMED".
func (c Cmds) RsubArgv(r *backends.ReservationSpec, start time.Time, loc *time.Location, cpn int, wait time.Duration) []string {
	secs := int64((r.Duration + time.Second - 1) / time.Second)
	a := []string{c.cmd("pbs_rsub"), "-R", start.In(loc).Format(RsubTimeLayout), "-D", strconv.FormatInt(secs, 10)}
	a = append(a, Select(r.Nodes, 0, cpn)...)
	a = append(a, "-N", CleanName(r.Name))
	if len(r.Users) > 0 {
		a = append(a, "-U", strings.Join(r.Users, ","))
	}
	if w := int((wait + time.Second - 1) / time.Second); w > 0 {
		a = append(a, "-I", strconv.Itoa(w))
	}
	return a
}

// RstatArgv shows one reservation in full (text: pbs_rstat has no JSON).
func (c Cmds) RstatArgv(id backends.ResvID) []string {
	return []string{c.cmd("pbs_rstat"), "-f", string(id)}
}

// RdelArgv deletes a reservation.
func (c Cmds) RdelArgv(id backends.ResvID) []string { return []string{c.cmd("pbs_rdel"), string(id)} }
