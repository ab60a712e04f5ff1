package frontend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
)

// The environment variables that find the daemon without a configuration.
const (
	EnvSocket = "GRIDSUB_SOCKET" // the daemon's unix socket
	EnvURL    = "GRIDSUB_URL"    // a daemon served over TCP: gridsub's configuration handling (Env.Connect) reads it
)

// Env is what a front-end call works with: where it writes, and how it
// finds the daemon.
type Env struct {
	Stdout, Stderr io.Writer
	// Connect finds the daemon when EnvSocket is not set or EnvURL is
	// (gridsub's configuration, a TCP daemon): the client and where it
	// is, or an error that says what to fix, printed as the tool's error.
	// Nil: such a call fails with that advice.
	Connect func(ctx context.Context, prog string) (*api.Client, string, error)
}

// Error is a front-end's error, printed as the tool prints its own
// ("squeue: error: ...") with the tool's exit status. Msg "" prints
// nothing (what was wrong is on stderr already).
type Error struct {
	Prog string
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Prog + ": error: " + e.Msg }

// Exit prints err as the tool prints its errors and returns the process's
// exit status for it (0 for nil).
func Exit(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var fe *Error
	if !errors.As(err, &fe) {
		fe = &Error{Prog: "gridsub", Code: 1, Msg: err.Error()}
	}
	if fe.Msg != "" {
		fmt.Fprintln(stderr, fe.Error())
	}
	return fe.Code
}

// feClient is a daemon client that knows the daemon's id prefix.
type feClient struct {
	*api.Client
	where  string
	prefix string
	now    time.Time // the daemon's clock at connection
}

// feFail is a front-end's error with the tool's exit status (1 for SLURM's
// and PBS's tools).
func feFail(prog string, format string, a ...any) error {
	return &Error{prog, 1, fmt.Sprintf(format, a...)}
}

// feConnect connects to the daemon and reads its id prefix.
//
// With GRIDSUB_SOCKET set (and no GRIDSUB_URL) it reads no configuration:
// a workflow engine's every poll costs one process start and a few local
// requests, and its environment needs no site's settings.
func feConnect(ctx context.Context, g *Env, prog string) (*feClient, error) {
	var c *feClient
	if sock := os.Getenv(EnvSocket); sock != "" && os.Getenv(EnvURL) == "" {
		c = &feClient{Client: api.NewUnixClient(sock), where: sock}
		h, err := c.Health(ctx)
		switch {
		case err == nil:
		case errors.Is(err, api.ErrNoDaemon):
			return nil, &Error{prog, 1, fmt.Sprintf("no gridsub daemon answers at %s (%s=%s); start it with `gridsub serve`", sock, EnvSocket, sock)}
		default:
			return nil, &Error{prog, 1, "asking the daemon: " + err.Error()}
		}
		if h.IDPrefix == "" {
			return nil, &Error{prog, 1, "the daemon at " + sock + " does not tell its job id prefix (an older gridsub serve?)"}
		}
		c.prefix, c.now = h.IDPrefix, h.Time
		return c, nil
	}
	if g.Connect == nil {
		return nil, &Error{prog, 1, "set " + EnvSocket + " to the daemon's socket (this front-end reads no configuration)"}
	}
	ac, where, err := g.Connect(ctx, prog)
	if err != nil {
		return nil, &Error{prog, 1, err.Error()}
	}
	c = &feClient{Client: ac, where: where}
	h, err := c.Health(ctx)
	if err != nil {
		return nil, &Error{prog, 1, "asking the daemon: " + err.Error()}
	}
	if h.IDPrefix == "" {
		return nil, &Error{prog, 1, "the daemon at " + c.where + " does not tell its job id prefix (an older gridsub serve?)"}
	}
	c.prefix, c.now = h.IDPrefix, h.Time
	return c, nil
}

// FrontID is the id a front-end prints for a grid id: its sequence
// number without the padding, then an array element's "_INDEX".
func FrontID(prefix, id string) string {
	return string(appendFrontID(nil, prefix, id))
}

// appendFrontID appends FrontID(prefix, id) to b.
func appendFrontID(b []byte, prefix, id string) []byte {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return append(b, id...)
	}
	num, el, _ := strings.Cut(rest, "_")
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil {
		return append(b, id...)
	}
	b = strconv.AppendUint(b, n, 10)
	if el != "" {
		b = append(append(b, '_'), el...)
	}
	return b
}

// gridID is the grid id of a front-end id ("42", "42_3", "42.gridsub"
// as qsub prints it), or the argument itself when it is a grid id.
func gridID(prefix, s string) string {
	s = strings.TrimSpace(s)
	if base, server, ok := strings.Cut(s, "."); ok && server == pbsServer {
		s = base
	}
	num, el, hasEl := strings.Cut(s, "_")
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil || num == "" || num[0] == '+' {
		return s
	}
	id := fmt.Sprintf("%s%06d", prefix, n)
	if hasEl {
		id += "_" + el
	}
	return id
}

// currentUser names the user the front-ends print as every job's owner:
// a daemon serves the user who runs it.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "gridsub"
}

// slurmState is a job's state in SLURM's words: long (sacct, scontrol,
// %T) and short (%t).
func slurmState(j *bridge.Job) (string, string) {
	switch j.State {
	case bridge.Running:
		return "RUNNING", "R"
	case bridge.Completed:
		return "COMPLETED", "CD"
	case bridge.Failed:
		if isTimeout(j) {
			return "TIMEOUT", "TO"
		}
		if isNodeFail(j) {
			return "NODE_FAIL", "NF"
		}
		return "FAILED", "F"
	case bridge.Cancelled:
		return "CANCELLED", "CA"
	case bridge.Rejected:
		return "FAILED", "F"
	}
	return "PENDING", "PD" // queued, held, reserved, submitting, dispatched
}

// isTimeout: the job's last component ended by its time limit.
func isTimeout(j *bridge.Job) bool {
	for _, c := range j.Comps {
		if c.State == backends.StateTimeout {
			return true
		}
	}
	return strings.Contains(j.Reason, "ended timeout")
}

// isNodeFail: the job was lost at its site, not ended by its command.
func isNodeFail(j *bridge.Job) bool {
	return strings.Contains(j.Reason, "ended lost")
}

// pendingReason is SLURM's reason for a pending job.
func pendingReason(j *bridge.Job) string {
	switch j.State {
	case bridge.Held:
		return "Dependency"
	case bridge.Reserved:
		return "Reservation"
	case bridge.Submitting, bridge.Dispatched:
		return "Resources"
	case bridge.Queued:
		if j.Predicted.Parts != nil {
			return "Resources"
		}
		return "Priority"
	}
	return "None"
}

// partition is what the front-ends show as a job's partition or queue:
// the one it asked for, else the sites it runs on, else "grid".
func partition(j *bridge.Job) string {
	for _, o := range j.Req.SiteOptions {
		if o.Partition != "" {
			return o.Partition
		}
	}
	return sitesOf(j)
}

func sitesOf(j *bridge.Job) string {
	var out []string
	for _, c := range j.Comps {
		if !contains(out, c.Site) {
			out = append(out, c.Site)
		}
	}
	if len(out) == 0 {
		return "grid"
	}
	return strings.Join(out, ",")
}

func account(j *bridge.Job) string {
	for _, o := range j.Req.SiteOptions {
		if o.Account != "" {
			return o.Account
		}
	}
	return ""
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// elapsed is how long the job has run (until now, or its end).
func elapsed(j *bridge.Job, now time.Time) time.Duration {
	return elapsedOf(j.Start, j.End, now)
}

func elapsedOf(start, end, now time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	if end.IsZero() {
		end = now
	}
	if end.Before(start) {
		return 0
	}
	return end.Sub(start)
}

// slurmDuration formats as SLURM does: M:SS, H:MM:SS, D-HH:MM:SS.
func slurmDuration(d time.Duration) string {
	return string(appendSlurmDuration(nil, d))
}

// appendSlurmDuration appends slurmDuration(d) to b.
func appendSlurmDuration(b []byte, d time.Duration) []byte {
	s := int64(d / time.Second)
	days, h, m, sec := s/86400, s/3600%24, s/60%60, s%60
	two := func(b []byte, v int64) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }
	switch {
	case days > 0:
		b = append(strconv.AppendInt(b, days, 10), '-')
		b = append(two(b, h), ':')
	case h > 0:
		b = append(strconv.AppendInt(b, h, 10), ':')
	default:
		b = append(strconv.AppendInt(b, m, 10), ':')
		return two(b, sec)
	}
	b = append(two(b, m), ':')
	return two(b, sec)
}

// slurmLimit formats a time limit: [D-]HH:MM:SS.
func slurmLimit(d time.Duration) string {
	s := int64(d / time.Second)
	days, h, m, sec := s/86400, s/3600%24, s/60%60, s%60
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, sec)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, sec)
}

// slurmTime formats a time as SLURM does, "Unknown" for none.
func slurmTime(t time.Time) string {
	if t.IsZero() {
		return "Unknown"
	}
	return t.Local().Format("2006-01-02T15:04:05")
}

// exitCode is SLURM's "status:signal" of an ended job ("0:0" otherwise).
func exitCode(j *bridge.Job) string {
	if !j.State.Final() || j.ExitCode < 0 {
		if j.State == bridge.Cancelled {
			return "0:15"
		}
		if j.State.Final() && j.State != bridge.Completed {
			return "1:0"
		}
		return "0:0"
	}
	return strconv.Itoa(j.ExitCode) + ":0"
}

// listJobs lists the daemon's jobs the filter selects, every page. Array
// parents are left out unless withParents: their elements are the jobs.
func (c *feClient) listJobs(ctx context.Context, f bridge.Filter) ([]*bridge.Job, error) {
	if f.Limit == 0 {
		f.Limit = api.MaxLimit
	}
	return c.ListAll(ctx, f)
}

// unfinished are the states of jobs not yet ended.
var unfinished = []bridge.JobState{bridge.Queued, bridge.Held, bridge.Reserved, bridge.Submitting, bridge.Dispatched, bridge.Running}
