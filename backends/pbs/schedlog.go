package pbs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// PBS denies a reservation without saying why: pbs_rsub prints DENIED, and
// the scheduler's reason ("PBS Failed to confirm resv: No available
// resources on nodes") is only in the scheduler's log on the server,
// $PBS_HOME/sched_logs/YYYYMMDD, one line per event:
//
//	11/28/2026 05:34:39;0200;pbs_sched;Resv;R337.localhost;PBS Failed to confirm resv: No available resources on nodes
//
// The dialect reads it back where the login node can read it (the default
// PBS_HOME, world-readable on a stock install) and says where to look
// otherwise.

// SchedLogDir is the scheduler's log directory under the default PBS_HOME.
const SchedLogDir = "/var/spool/pbs/sched_logs"

// SchedLogPath is the scheduler log of day (the server's date).
func SchedLogPath(day time.Time) string { return SchedLogDir + "/" + day.Format("20060102") }

// SchedLogArgv greps the scheduler log of day for reservation id's lines
// (fixed string, no pattern; -s: a missing or unreadable file is no
// message).
func SchedLogArgv(day time.Time, id backends.ResvID) []string {
	return []string{"grep", "-h", "-s", "-F", "--", ";Resv;" + string(id) + ";", SchedLogPath(day)}
}

// ParseSchedLog returns the reason the scheduler log gives for reservation
// id: the last message of its lines that is not a step of a confirmation
// ("Confirming 1 Occurrences", "Reservation Confirmed"), or "" when there
// is none.
func ParseSchedLog(out []byte, id backends.ResvID) string {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ";", 6)
		if len(f) < 6 || f[3] != "Resv" || f[4] != string(id) {
			continue
		}
		msg := strings.TrimSpace(f[5])
		if msg == "" || strings.HasPrefix(msg, "Confirming") || msg == "Reservation Confirmed" {
			continue
		}
		last = msg
	}
	return last
}

// deniedWhy is why the scheduler denied reservation id, read from its log
// at the login node, or where to find it when the log cannot be read.
func (d *dialect) deniedWhy(ctx context.Context, x *sshbatch.Exec, id backends.ResvID) string {
	day := d.cfg.Now()
	if d.cfg.Location != nil {
		day = day.In(d.cfg.Location)
	}
	r, err := x.Run(ctx, SchedLogArgv(day, id), nil)
	if err == nil && (r.ExitCode == 0 || r.ExitCode == 1) {
		if why := ParseSchedLog(r.Stdout, id); why != "" {
			return fmt.Sprintf("the scheduler says: %q (%s)", why, SchedLogPath(day))
		}
	}
	return fmt.Sprintf("PBS gives the reason only in its scheduler log on the server: %s (that is $PBS_HOME/sched_logs/%s; the lines naming %s)",
		SchedLogPath(day), day.Format("20060102"), id)
}
