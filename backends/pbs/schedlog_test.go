package pbs

import (
	"os"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// testdata/schedlog.txt: lines of the real OpenPBS testbed's scheduler log
// (/var/spool/pbs/sched_logs/20261128), one denied and one confirmed
// reservation.
func TestParseSchedLog(t *testing.T) {
	out, err := os.ReadFile("testdata/schedlog.txt")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"R337.localhost":  "PBS Failed to confirm resv: No available resources on nodes",
		"R1668.localhost": "", // confirmed: no reason to give
		"R33.localhost":   "", // a prefix of another id is not that id
		"R9.localhost":    "",
	} {
		if got := ParseSchedLog(out, backends.ResvID(id)); got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
	if got := ParseSchedLog([]byte("garbage;;\n;;;;\n"), "R1.x"); got != "" {
		t.Errorf("garbage: %q", got)
	}
	argv := SchedLogArgv(time.Date(2026, 11, 28, 23, 0, 0, 0, time.UTC), "R337.localhost")
	if argv[len(argv)-1] != "/var/spool/pbs/sched_logs/20261128" || argv[len(argv)-2] != ";Resv;R337.localhost;" || argv[0] != "grep" {
		t.Errorf("argv %q", argv)
	}
}
