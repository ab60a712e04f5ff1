package slurm

import (
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// A reservation's start is counted from SLURM's whole-second now and rounded
// up: SLURM never opens it before the instant asked for.
func TestCreateReservationArgvStartRoundsUp(t *testing.T) {
	now := time.Date(2026, 11, 22, 8, 34, 7, 619_000_000, time.UTC)
	for _, c := range []struct {
		start time.Time
		want  string
	}{
		// 08:34:36.554 from a controller whose now is 08:34:07 (whole
		// seconds) or later: +30, never +29 (08:34:36, too early).
		{now.Add(28*time.Second + 935*time.Millisecond), "StartTime=now+30"},
		{now.Add(29 * time.Second), "StartTime=now+30"},
		{now.Add(-619 * time.Millisecond).Add(29 * time.Second), "StartTime=now+29"}, // a whole second
		{now.Add(time.Millisecond), "StartTime=now+1"},
		{now, "StartTime=now+1"},
		{now.Add(-time.Second), "StartTime=now"},
	} {
		argv := CreateReservationArgv(&backends.ReservationSpec{Name: "g1-r", Start: c.start, Duration: 2 * time.Minute, Nodes: 2, Users: []string{"u"}}, now, "")
		if argv[4] != c.want {
			t.Errorf("start %s after now: %q, want %q (argv %q)", c.start.Sub(now), argv[4], c.want, argv)
		}
	}
}
