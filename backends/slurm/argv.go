package slurm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gridsub/gridsub/backends"
)

// Every builder returns an argv: separate words that the Runner delivers
// literally (the transport quotes them), so nothing a user wrote is ever
// interpreted by the remote shell.

// quietEnv runs a SLURM client with epoch times and without the user's
// SQUEUE_*/SINFO_* overrides of formats, sorting and states.
func quietEnv(argv ...string) []string {
	return append([]string{"env", "-u", "SQUEUE_FORMAT", "-u", "SQUEUE_FORMAT2", "-u", "SQUEUE_SORT",
		"-u", "SQUEUE_STATES", "-u", "SINFO_FORMAT", "-u", "SINFO_SORT", "SLURM_TIME_FORMAT=%s"}, argv...)
}

// submitScript runs at the login node as `bash -c submitScript gridsub-submit
// <jobdir> <sbatch options...>` with the wrapper on stdin: it creates the job
// directory, stores the wrapper there and submits it from there, all in one
// remote command.
const submitScript = `set -e; d=$1; shift; mkdir -p -- "$d"; cd -- "$d"; cat > ` + ScriptFile + `; chmod 0700 ` + ScriptFile + `; exec sbatch --chdir="$PWD" "$@" ` + ScriptFile

// cleanName makes a job name SLURM can store: control characters (which
// would break the one-line output formats) become '?'. Everything else,
// quotes and $() included, stays literal.
func cleanName(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// walltimeMinutes rounds a walltime up to whole minutes (SLURM's unit; it
// enforces limits on a periodic pass anyway).
func walltimeMinutes(d time.Duration) int {
	m := int((d + time.Minute - 1) / time.Minute)
	return max(m, 1)
}

// SbatchArgs builds the sbatch options for spec (without the script).
func SbatchArgs(spec *backends.JobSpec, partition string) []string {
	name := spec.Name
	if name == "" {
		name = spec.GridID
	}
	a := []string{"--parsable", "--job-name=" + cleanName(name), "--comment=" + GridTag(spec.GridID)}
	if spec.Partition != "" {
		partition = spec.Partition
	}
	if partition != "" {
		a = append(a, "--partition="+partition)
	}
	if spec.Account != "" {
		a = append(a, "--account="+spec.Account)
	}
	if spec.Reservation != "" {
		a = append(a, "--reservation="+spec.Reservation)
	}
	a = append(a, "--nodes="+strconv.Itoa(spec.Nodes))
	if spec.CoresPerNode > 0 {
		a = append(a, "--ntasks-per-node=1", "--cpus-per-task="+strconv.Itoa(spec.CoresPerNode))
	} else {
		// Site default: whole nodes, which is the unit gridsub schedules in.
		a = append(a, "--exclusive")
	}
	if spec.MemPerNode > 0 {
		a = append(a, "--mem="+strconv.FormatInt(MemMiB(spec.MemPerNode), 10)+"M")
	}
	if spec.GPUsPerNode > 0 {
		a = append(a, "--gres=gpu:"+strconv.Itoa(spec.GPUsPerNode))
	}
	return append(a, "--time="+strconv.Itoa(walltimeMinutes(spec.Walltime)),
		"--output="+StdoutFile, "--error="+StderrFile)
}

// MemMiB is a memory size in MiB, rounded up (sbatch's --mem unit).
func MemMiB(b int64) int64 { return (b + 1<<20 - 1) >> 20 }

// SubmitArgv is the one remote command of a submission; the wrapper goes on
// its stdin.
func SubmitArgv(jobDir string, sbatchArgs []string) []string {
	return append([]string{"bash", "-c", submitScript, "gridsub-submit", jobDir}, sbatchArgs...)
}

func joinIDs(ids []backends.JobID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ",")
}

// BatchSbatchArgv is one job's command in a batched submission: sbatch
// reads the wrapper from stdin (the batch's here-document), so no file is
// written and no shell started per job; --chdir (relative paths are
// relative to the login directory; sbatch makes it absolute) is the job
// directory, which MkdirArgv made before.
func BatchSbatchArgv(jobDir string, sbatchArgs []string) []string {
	return append([]string{"sbatch", "--chdir=" + jobDir}, sbatchArgs...)
}

// SqueueArgv asks for the given jobs in every state, in SqueueFormat.
func SqueueArgv(ids []backends.JobID) []string {
	return quietEnv("squeue", "-h", "-r", "-t", "all", "-j", joinIDs(ids), "-O", SqueueFormat())
}

// SqueueMineArgv lists all of the login user's jobs the controller still
// knows (for FindByGridID).
func SqueueMineArgv() []string {
	return quietEnv("squeue", "-h", "-r", "--me", "-t", "all", "-O", SqueueFormat())
}

// SqueueActiveArgv lists every user's live jobs (for Info).
func SqueueActiveArgv() []string {
	return quietEnv("squeue", "-h", "-r", "-t", "PD,CF,R,CG,S", "-O", SqueueFormat())
}

// ScontrolJobArgv shows one job on one line.
func ScontrolJobArgv(id backends.JobID) []string {
	return quietEnv("scontrol", "show", "job", "-o", string(id))
}

// SinfoArgv lists every node in every partition.
func SinfoArgv() []string { return quietEnv("sinfo", "-h", "-N", "-o", SinfoFormat) }

// ScancelArgv cancels jobs.
func ScancelArgv(ids ...backends.JobID) []string {
	a := []string{"scancel"}
	for _, id := range ids {
		a = append(a, string(id))
	}
	return a
}

// SacctArgv reads finished jobs from accounting, bounded by since (sacct -j
// alone searches from the epoch and recycled ids would match).
func SacctArgv(ids []backends.JobID, since time.Time) []string {
	return quietEnv("sacct", "-X", "-n", "-P", "-j", joinIDs(ids), "-S", since.UTC().Format("2006-01-02T15:04:05"),
		"--format=JobIDRaw,State,ExitCode,Start,End")
}

// JobCompArgv greps the jobcomp/filetxt log for the given ids.
func JobCompArgv(file string, ids []backends.JobID) []string {
	return []string{"grep", "-E", jobCompPattern(ids), "--", file}
}

// JobCompGridArgv greps the jobcomp log for jobs run in a grid job's
// directories.
func JobCompGridArgv(file, gridID string) []string {
	return []string{"grep", "-F", "/gridsub/" + gridID, "--", file}
}

// ConfigArgv shows the controller's configuration (to find JobCompLoc).
func ConfigArgv() []string { return quietEnv("scontrol", "show", "config") }

var resvNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// CreateReservationArgv asks for r.Nodes nodes from r.Start for r.Duration.
// The start is relative to the controller's clock ("now+<seconds>"), which
// sidesteps the cluster's time zone. SLURM's "now" is whole seconds, so the
// offset is counted from now truncated to the second and rounded up: the
// reservation never opens before r.Start (a job inside must not start
// early). A start in the past means now.
func CreateReservationArgv(r *backends.ReservationSpec, now time.Time, partition string) []string {
	start := "now"
	if d := r.Start.Sub(now.Truncate(time.Second)); d > 0 {
		start = "now+" + strconv.Itoa(int((d+time.Second-1)/time.Second))
	}
	a := []string{"scontrol", "create", "reservation", "ReservationName=" + r.Name, "StartTime=" + start,
		"Duration=" + strconv.Itoa(walltimeMinutes(r.Duration)), "NodeCnt=" + strconv.Itoa(r.Nodes),
		"Users=" + strings.Join(r.Users, ",")}
	if partition != "" {
		a = append(a, "PartitionName="+partition)
	}
	return a
}

// ShowReservationArgv shows one reservation on one line, epoch times.
func ShowReservationArgv(id backends.ResvID) []string {
	return quietEnv("scontrol", "show", "reservation", "-o", string(id))
}

// DeleteReservationArgv deletes a reservation.
func DeleteReservationArgv(id backends.ResvID) []string {
	return []string{"scontrol", "delete", "ReservationName=" + string(id)}
}

func checkIDs(ids []backends.JobID) error {
	for _, id := range ids {
		if !validJobID(string(id)) {
			return fmt.Errorf("%w: job id %q is not a SLURM job id (digits, optionally _<task>)", backends.ErrInvalidSpec, id)
		}
	}
	return nil
}
