package pbs

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

// script is a Runner that answers each command by the name of the program
// (or of the bash script) it runs, in order, and records the argv.
type script struct {
	mu    sync.Mutex
	resp  map[string][]backends.Result
	calls [][]string
}

func (s *script) Run(_ context.Context, argv []string, _ io.Reader) (backends.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, argv)
	name := cmdName(argv)
	if len(argv) > 3 && strings.HasPrefix(argv[3], "gridsub-") {
		name = argv[3]
	}
	q := s.resp[name]
	if len(q) == 0 {
		return backends.Result{ExitCode: 127, Stderr: []byte("unexpected command " + strings.Join(argv, " "))}, nil
	}
	r := q[0]
	if len(q) > 1 {
		s.resp[name] = q[1:]
	}
	return r, nil
}

func ok(out string) backends.Result { return backends.Result{Stdout: []byte(out)} }

const oneNode = `{"pbs_version":"23.06.06","nodes":{"vm":{"state":"free","resources_available":{"ncpus":2}}}}`

func newScripted(t *testing.T, resp map[string][]backends.Result) (*Backend, *script) {
	t.Helper()
	s := &script{resp: resp}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	b := New(Config{Name: "p", RemoteDir: "/scratch/u", User: "u", BinDir: "/site/pbs/bin", Location: time.UTC,
		ResvWait: 2 * time.Second, Now: func() time.Time { now = now.Add(time.Second); return now }}, s, nil)
	return b, s
}

// TestCommandsUseBinDir: every PBS command is called by its path in the
// configured bin directory, never by bare name.
func TestCommandsUseBinDir(t *testing.T) {
	c := Cmds{Bin: "/site/pbs/bin"}
	spec := &backends.JobSpec{GridID: "g1", Nodes: 2, Walltime: 90 * time.Second, Command: []string{"true"}, Reservation: "R7.srv"}
	for _, argv := range [][]string{c.SubmitArgv("/d", QsubArgs(spec, "workq", 4)), c.StatusArgv([]backends.JobID{"1.s"}),
		c.StatusArgv(make([]backends.JobID, DirectStatusMax+1)), c.FindArgv("u", "g:g1"), c.NodesArgv(), c.ServerArgv(), c.QueuesArgv(),
		c.QdelArgv("1.s"), c.RstatArgv("R1"), c.RdelArgv("R1"), c.ActiveJSONArgv(),
		c.RsubArgv(&backends.ReservationSpec{Name: "r", Nodes: 1, Duration: time.Minute}, time.Unix(0, 0), time.UTC, 2, time.Second)} {
		joined := strings.Join(argv, " ")
		if !strings.Contains(joined, "/site/pbs/bin/") {
			t.Errorf("%q does not name a command in the bin dir", joined)
		}
		for _, bare := range []string{"qsub", "qstat", "qdel", "qselect", "pbsnodes", "pbs_rsub", "pbs_rstat", "pbs_rdel"} {
			if argv[0] == bare {
				t.Errorf("%q runs %s by bare name", joined, bare)
			}
		}
	}
	got := strings.Join(QsubArgs(spec, "workq", 4), " ")
	want := "-N g1 -v GRIDSUB_TAG=g:g1 -r n -l select=2:ncpus=4 -l place=scatter:excl -l walltime=0:01:30 -q R7"
	if got != want {
		t.Errorf("qsub args\n got %s\nwant %s", got, want)
	}
	if n := CleanName("$(touch x); rm -rf ~ 'a\"b"); strings.ContainsAny(n, " $();~'\"") || n[0] != 'g' {
		t.Errorf("CleanName kept something qsub refuses: %q", n)
	}
	if Walltime(25*time.Hour+time.Millisecond) != "25:00:01" {
		t.Error(Walltime(25*time.Hour + time.Millisecond))
	}
}

// TestHistoryOff: with job_history_enable off PBS forgets a finished job
// (qstat: Unknown Job Id, 153): its exit-code file answers, and a job with
// neither is lost.
func TestHistoryOff(t *testing.T) {
	b, s := newScripted(t, map[string][]backends.Result{
		"pbsnodes":       {ok(oneNode)},
		"gridsub-submit": {ok("41.srv\n"), ok("42.srv\n")},
		"qstat":          {{ExitCode: 153, Stderr: []byte("qstat: Unknown Job Id 41.srv\nqstat: Unknown Job Id 42.srv\n")}},
		"grep":           {ok("/scratch/u/gridsub/a/.gridsub-exit:3\n")},
	})
	ctx := context.Background()
	for _, g := range []string{"a", "b"} {
		if _, err := b.Submit(ctx, &backends.JobSpec{GridID: g, Nodes: 1, Walltime: time.Minute, Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.Status(ctx, []backends.JobID{"41.srv", "42.srv"})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].State != backends.StateFailed || st[0].ExitCode != 3 || !strings.Contains(st[0].Reason, "exit-code file") {
		t.Errorf("41: %+v, want failed 3 from the exit-code file", st[0])
	}
	// No record anywhere yet: "ending", not lost (sshbatch.EndingGrace).
	if st[1].State.Final() || !strings.HasPrefix(st[1].Reason, "ending") {
		t.Errorf("42: %+v, want ending (unconfirmed), not final", st[1])
	}
	last := s.calls[len(s.calls)-1]
	if strings.Join(last, " ") != "grep -H -s  /scratch/u/gridsub/a/.gridsub-exit /scratch/u/gridsub/b/.gridsub-exit" {
		t.Errorf("exit files read with %q", last)
	}
	// A server that cannot be reached is retryable, not a rejection.
	b, _ = newScripted(t, map[string][]backends.Result{"qstat": {{ExitCode: 15010, Stderr: []byte("qstat: cannot connect to server srv (errno=111)")}}})
	if _, err := b.Status(ctx, []backends.JobID{"1.srv"}); !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("server down: %v, want ErrUnavailable", err)
	}
}

// TestFindForgottenJob: a job PBS no longer lists is found through the id
// its job directory recorded, with its exit-code file's state; a directory
// of another grid job whose id merely starts alike is ignored.
func TestFindForgottenJob(t *testing.T) {
	b, s := newScripted(t, map[string][]backends.Result{
		"gridsub-find": {ok("Job Id: 50.srv|Job_Name=x|Job_Owner=u@h|job_state=R|Variable_List=GRIDSUB_TAG=g:job1,PBS_O_WORKDIR=/scratch/u/gridsub/job1-0\n" +
			"Job Id: 51.srv|Job_Name=x|Job_Owner=other@h|job_state=R|Variable_List=GRIDSUB_TAG=g:job1\n" +
			"Job Id: 52.srv|Job_Name=x|Job_Owner=u@h|job_state=R|Variable_List=GRIDSUB_TAG=g:job10\n")},
		"gridsub-ids": {ok("gridsub/job1-0:50.srv\ngridsub/job1-1:44.srv\ngridsub/job1-x:45.srv\n")},
		"grep":        {ok("/scratch/u/gridsub/job1-1/.gridsub-exit:0\n")},
	})
	got, err := b.FindByGridID(context.Background(), "job1")
	calls := s.calls
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "50.srv" || got[0].State != backends.StateRunning || got[1].ID != "44.srv" || got[1].State != backends.StateCompleted || got[1].GridID != "job1" {
		t.Fatalf("calls %q\nfound %+v, want 50 running (listed) and 44 completed (id file + exit file)", calls, got)
	}
}

// TestReservationDecisions: UNCONFIRMED is waited for; DENIED, a shrunk
// grant and a reservation never confirmed are rejected with the reason and
// leave nothing behind.
func TestReservationDecisions(t *testing.T) {
	ctx := context.Background()
	spec := &backends.ReservationSpec{Name: "r", Start: time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC), Duration: 10 * time.Minute, Nodes: 1}
	rstat := func(id, state, nodes string) backends.Result {
		out := "Resv ID: " + id + "\nreserve_state = " + state + "\nreserve_start = Tue Nov 24 13:00:00 2026\nreserve_end = Tue Nov 24 13:10:00 2026\n"
		if nodes != "" {
			out += "resv_nodes = " + nodes + "\n"
		}
		return ok(out)
	}
	// UNCONFIRMED, then confirmed on the second look.
	b, s := newScripted(t, map[string][]backends.Result{"pbsnodes": {ok(oneNode)}, "pbs_rsub": {ok("R5.srv UNCONFIRMED\n")},
		"pbs_rstat": {rstat("R5.srv", "RESV_UNCONFIRMED", ""), rstat("R5.srv", "RESV_CONFIRMED", "(vm:ncpus=2)")}})
	id, err := b.CreateReservation(ctx, spec)
	if err != nil || id != "R5.srv" {
		t.Fatalf("unconfirmed then confirmed: %q %v", id, err)
	}
	rsub := strings.Join(s.calls[1], " ")
	if !strings.Contains(rsub, "-R 202611241300.00 -D 600 -l select=1:ncpus=2 -l place=scatter:excl -N r -U u -I 2") {
		t.Errorf("pbs_rsub argv %q", rsub)
	}
	// DENIED by the scheduler.
	b, _ = newScripted(t, map[string][]backends.Result{"pbsnodes": {ok(oneNode)}, "pbs_rsub": {ok("R6.srv DENIED\n")}})
	if _, err := b.CreateReservation(ctx, spec); !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), "denied") {
		t.Errorf("denied: %v", err)
	}
	// Denied after pbs_rsub returned UNCONFIRMED: PBS removes it at once.
	b, _ = newScripted(t, map[string][]backends.Result{"pbsnodes": {ok(oneNode)}, "pbs_rsub": {ok("R7.srv UNCONFIRMED\n")},
		"pbs_rstat": {{Stderr: []byte("pbs_rstat: Unknown Reservation Id\n")}}})
	if _, err := b.CreateReservation(ctx, spec); !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("vanished: %v", err)
	}
	// Never confirmed within ResvWait: deleted, rejected.
	b, s = newScripted(t, map[string][]backends.Result{"pbsnodes": {ok(oneNode)}, "pbs_rsub": {ok("R8.srv UNCONFIRMED\n")},
		"pbs_rstat": {rstat("R8.srv", "RESV_UNCONFIRMED", "")}, "pbs_rdel": {ok("")}})
	if _, err := b.CreateReservation(ctx, spec); !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), "still unconfirmed") {
		t.Errorf("never confirmed: %v", err)
	}
	if !slices.ContainsFunc(s.calls, func(c []string) bool { return c[0] == "/site/pbs/bin/pbs_rdel" && c[1] == "R8.srv" }) {
		t.Errorf("an unconfirmed reservation was not deleted: calls %q", s.calls)
	}
	// Granted with fewer nodes than asked: deleted, rejected.
	two := `{"pbs_version":"x","nodes":{"a":{"state":"free","resources_available":{"ncpus":2}},"b":{"state":"free","resources_available":{"ncpus":2}}}}`
	b, s = newScripted(t, map[string][]backends.Result{"pbsnodes": {ok(two)}, "pbs_rsub": {ok("R9.srv CONFIRMED\n")},
		"pbs_rstat": {rstat("R9", "RESV_CONFIRMED", "(a:ncpus=2)")}, "pbs_rdel": {ok("")}})
	spec2 := *spec
	spec2.Nodes = 2
	if _, err := b.CreateReservation(ctx, &spec2); !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), "only 1 of the 2") {
		t.Errorf("shrunk: %v", err)
	}
	if last := s.calls[len(s.calls)-1]; last[0] != "/site/pbs/bin/pbs_rdel" {
		t.Errorf("a shrunk reservation was not deleted: last call %q", last)
	}
	// pbs_rsub's own refusal keeps its words.
	b, _ = newScripted(t, map[string][]backends.Result{"pbsnodes": {ok(oneNode)},
		"pbs_rsub": {{ExitCode: 238, Stderr: []byte("pbs_rsub: Bad time specification(s)\n")}}})
	if _, err := b.CreateReservation(ctx, spec); !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), "Bad time specification") {
		t.Errorf("refused: %v", err)
	}
}

// TestSubmitRefusals: what qsub would accept but never run is refused
// before anything reaches the site.
func TestSubmitRefusals(t *testing.T) {
	b, s := newScripted(t, map[string][]backends.Result{"pbsnodes": {ok(oneNode)}})
	ctx := context.Background()
	for _, c := range []struct {
		spec backends.JobSpec
		want error
		msg  string
	}{
		{backends.JobSpec{GridID: "a", Nodes: 2, Walltime: time.Minute, Command: []string{"x"}}, backends.ErrRejected, "has 1 usable"},
		{backends.JobSpec{GridID: "a", Nodes: 1, CoresPerNode: 3, Walltime: time.Minute, Command: []string{"x"}}, backends.ErrRejected, "have 2"},
		{backends.JobSpec{GridID: "a/../b", Nodes: 1, Walltime: time.Minute, Command: []string{"x"}}, backends.ErrInvalidSpec, "grid id"},
		{backends.JobSpec{GridID: "a", Nodes: 1, Walltime: time.Minute, Command: []string{"x"}, Reservation: "R1; rm"}, backends.ErrInvalidSpec, "reservation"},
		{backends.JobSpec{GridID: "a", Nodes: 1, Walltime: time.Minute, Command: []string{"x"}, Outputs: []string{"../x"}}, backends.ErrInvalidSpec, "output"},
	} {
		if _, err := b.Submit(ctx, &c.spec); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: %v, want %v naming %q", c.spec, err, c.want, c.msg)
		}
	}
	bad := New(Config{Name: "p", RemoteDir: "/scratch/a:b,c"}, s, nil)
	if _, err := bad.Submit(ctx, &backends.JobSpec{GridID: "a", Nodes: 1, Walltime: time.Minute, Command: []string{"x"}}); !errors.Is(err, backends.ErrInvalidSpec) || !strings.Contains(err.Error(), "remote directory") {
		t.Errorf("remote dir with ':' and ',': %v", err)
	}
	for _, argv := range s.calls {
		if cmdName(argv) == "qsub" {
			t.Errorf("qsub ran: %q", argv)
		}
	}
}
