package slurm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
)

// replay is a Runner that answers from the captured outputs: the site has
// purged every job from squeue (MinJobAge passed), accounting is disabled,
// and the jobcomp log is the captured one.
type replay struct {
	t     *testing.T
	mu    sync.Mutex
	calls []string
	exits map[string]string // exit-code file path -> content
}

func (r *replay) Run(_ context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	name := cmdName(argv)
	if name == "scontrol" && strings.Join(argv[len(argv)-2:], " ") == "show config" {
		name = "scontrol-config"
	}
	if name == "grep" && argv[1] == "-H" {
		name = "grep-exit"
	}
	r.mu.Lock()
	r.calls = append(r.calls, name)
	r.mu.Unlock()
	switch name {
	case "sbatch":
		if stdin == nil || argv[3] != "gridsub-submit" {
			r.t.Errorf("submission without wrapper on stdin: %q", argv)
		}
		return backends.Result{Stdout: []byte("777\n")}, nil
	case "squeue":
		return fixture(r.t, "squeue_invalid"), nil
	case "scontrol-config":
		return fixture(r.t, "scontrol_config_jobcomp"), nil
	case "sacct":
		return fixture(r.t, "sacct_disabled"), nil
	case "scontrol":
		return backends.Result{ExitCode: 1, Stderr: []byte("slurm_load_jobs error: Invalid job id specified\n")}, nil
	case "grep-exit":
		var out bytes.Buffer
		for _, p := range argv[4:] {
			if c, ok := r.exits[p]; ok {
				out.WriteString(p + ":" + c + "\n")
			}
		}
		return backends.Result{Stdout: out.Bytes(), ExitCode: 2}, nil // rc 2: some file missing
	case "grep":
		// grep -E ^JobId=(a|b) -- file over the captured log
		pat := argv[2]
		ids := strings.Split(strings.TrimSuffix(strings.TrimPrefix(pat, "^JobId=("), ") "), "|")
		var out bytes.Buffer
		for _, l := range lines(fixture(r.t, "jobcomp").Stdout) {
			for _, id := range ids {
				if strings.HasPrefix(l, "JobId="+id+" ") {
					out.WriteString(l + "\n")
				}
			}
		}
		rc := 0
		if out.Len() == 0 {
			rc = 1
		}
		return backends.Result{Stdout: out.Bytes(), ExitCode: rc}, nil
	}
	r.t.Fatalf("unexpected command %q", argv)
	return backends.Result{}, nil
}

func (r *replay) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := strings.Join(r.calls, ",")
	r.calls = nil
	return s
}

func TestStatusFallbackChain(t *testing.T) {
	rp := &replay{t: t, exits: map[string]string{"/scratch/gridsub/g-exit/.gridsub-exit": "0"}}
	now := time.Unix(1_800_000_000, 0)
	b := New(Config{Name: "siteA", RemoteDir: "/scratch", Now: func() time.Time { return now }}, rp, nil)
	ctx := context.Background()
	id, err := b.Submit(ctx, &backends.JobSpec{GridID: "g-exit", Nodes: 1, Walltime: time.Minute, Command: []string{"true"}})
	if err != nil || id != "777" {
		t.Fatalf("Submit: %q %v", id, err)
	}
	rp.take()
	// 888 is a job the broker hands back after a restart (its directory
	// has no exit-code file); "bogus" no job SLURM could have given.
	b.Remember("888", "g-888", 0, 1)
	ids := []backends.JobID{"1", "777", "888", "19", "bogus"}
	st, err := b.Status(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	// No rung has a record of 888: it is "ending", not lost yet. The id
	// SLURM could not have given is lost at once.
	want := []struct {
		state backends.State
		code  int
	}{{backends.StateFailed, 3}, {backends.StateCompleted, 0}, {backends.StateRunning, -1}, {backends.StateTimeout, 0}, {backends.StateLost, -1}}
	for i, w := range want {
		if st[i].ID != ids[i] || st[i].State != w.state || st[i].ExitCode != w.code {
			t.Errorf("%s: %+v, want %s exit %d", ids[i], st[i], w.state, w.code)
		}
	}
	if !strings.Contains(st[0].Reason, "jobcomp") || !strings.Contains(st[1].Reason, "exit-code file") || st[0].Name == "" {
		t.Errorf("reasons do not say where the answer came from: %q / %q (name %q)", st[0].Reason, st[1].Reason, st[0].Name)
	}
	if !strings.HasPrefix(st[2].Reason, "ending") {
		t.Errorf("888: reason %q, want it to say the job is ending, unconfirmed", st[2].Reason)
	}
	// The ladder: squeue, sacct (accounting disabled), the controller's
	// record of each of the first ScontrolRung jobs left, the jobcomp log,
	// the exit-code files.
	if got := rp.take(); got != "squeue,sacct,scontrol,scontrol,scontrol,scontrol,scontrol-config,grep,grep-exit" {
		t.Errorf("first poll ran %s", got)
	}
	// The jobcomp location is cached and sacct is not asked again; once
	// EndingGrace has passed with no record anywhere, 888 is lost.
	now = now.Add(sshbatch.EndingGrace)
	st, err = b.Status(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if got := rp.take(); got != "squeue,scontrol,scontrol,scontrol,scontrol,grep,grep-exit" {
		t.Errorf("second poll ran %s", got)
	}
	if st[2].State != backends.StateLost {
		t.Errorf("after the grace: %+v, want lost", st[2])
	}
}

func TestStatusControllerDown(t *testing.T) {
	down := runnerFunc(func(ctx context.Context, argv []string, _ io.Reader) (backends.Result, error) {
		return backends.Result{ExitCode: 1, Stderr: []byte("slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")}, nil
	})
	_, err := New(Config{Name: "x"}, down, nil).Status(context.Background(), []backends.JobID{"1"})
	if !errors.Is(err, backends.ErrUnavailable) || !backends.Retryable(err) {
		t.Fatalf("err = %v, want retryable ErrUnavailable", err)
	}
	garbage := runnerFunc(func(ctx context.Context, argv []string, _ io.Reader) (backends.Result, error) {
		return backends.Result{Stdout: []byte("JOBID PARTITION NAME USER ST\n42 batch x u R\n")}, nil
	})
	_, err = New(Config{Name: "x"}, garbage, nil).Status(context.Background(), []backends.JobID{"42"})
	if !errors.Is(err, backends.ErrBadOutput) || !strings.Contains(err.Error(), "JOBID PARTITION") {
		t.Fatalf("err = %v, want ErrBadOutput quoting the text", err)
	}
}

func TestCreateReservationWithdrawsClampedGrant(t *testing.T) {
	var calls []string
	run := runnerFunc(func(ctx context.Context, argv []string, _ io.Reader) (backends.Result, error) {
		calls = append(calls, strings.Join(argv[len(argv)-3:], " "))
		switch {
		case argv[0] == "scontrol" && argv[1] == "create":
			return fixture(t, "resv_create_clamped"), nil
		case strings.Contains(strings.Join(argv, " "), "show reservation"):
			return fixture(t, "resv_show_clamped"), nil
		case argv[0] == "scontrol" && argv[1] == "delete":
			return backends.Result{}, nil
		}
		t.Fatalf("unexpected %q", argv)
		return backends.Result{}, nil
	})
	b := New(Config{Name: "siteB", User: "griduser"}, run, nil)
	_, err := b.CreateReservation(context.Background(), &backends.ReservationSpec{Name: "capr2", Start: time.Now(), Duration: 10 * time.Minute, Nodes: 4})
	if !errors.Is(err, backends.ErrRejected) || !strings.Contains(err.Error(), "only 2 of the 4") {
		t.Fatalf("err = %v, want a rejection naming 2 of 4 nodes", err)
	}
	if len(calls) != 3 || !strings.Contains(calls[2], "ReservationName=capr2") {
		t.Fatalf("calls %q: want create, show, delete", calls)
	}
}

type runnerFunc func(context.Context, []string, io.Reader) (backends.Result, error)

func (f runnerFunc) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	return f(ctx, argv, stdin)
}

func TestStatusChunksHugeBatches(t *testing.T) {
	var mu sync.Mutex
	n := map[string]int{}
	run := runnerFunc(func(ctx context.Context, argv []string, _ io.Reader) (backends.Result, error) {
		mu.Lock()
		n[cmdName(argv)]++
		mu.Unlock()
		if cmdName(argv) == "sacct" {
			return fixture(t, "sacct_disabled"), nil
		}
		return backends.Result{}, nil // squeue knows none of them, no exit-code files
	})
	now := time.Unix(1_800_000_000, 0)
	b := New(Config{Name: "x", JobCompFile: "-", RemoteDir: "~/jobs", Now: func() time.Time { return now }}, run, nil)
	if b.RemoteDir() != "jobs" {
		t.Errorf("RemoteDir %q: a leading ~/ must become relative to the login directory", b.RemoteDir())
	}
	ids := make([]backends.JobID, 2*MaxIDsPerCommand+1)
	for i := range ids {
		ids[i] = backends.JobID(strconv.Itoa(i + 1))
	}
	st, err := b.Status(context.Background(), ids)
	if err != nil || len(st) != len(ids) || st[len(ids)-1].State != backends.StateLost {
		t.Fatalf("Status: %d entries, %v", len(st), err)
	}
	if n["squeue"] != 3 || n["sacct"] != 1 || n["grep"] != 0 || n["scontrol"] != 2*ScontrolRung+1 {
		t.Errorf("commands %v: want 3 squeue (chunks of %d), 1 sacct (then disabled), %d scontrol (up to %d a chunk), no grep", n, MaxIDsPerCommand, 2*ScontrolRung+1, ScontrolRung)
	}
}

// TestFindByGridIDIgnoresOtherRemoteDirs: the jobcomp log is shared by every
// user of the site; a record with the same tag from another broker's job
// directory is not ours, and adopting it would report a job that never ran.
func TestFindByGridIDIgnoresOtherRemoteDirs(t *testing.T) {
	const tag = "gabc-000007-a1"
	line := func(id, dir string) string {
		return "JobId=" + id + " UserId=griduser(1001) GroupId=griduser(1001) Name=x JobState=COMPLETED Partition=batch TimeLimit=5 " +
			"StartTime=2026-11-22T02:43:22 EndTime=2026-11-22T02:43:23 NodeList=anode1 NodeCnt=1 ProcCnt=1 WorkDir=" + dir +
			" ReservationName= Tres=cpu=1 Account= QOS= WcKey= Cluster=sitea SubmitTime=2026-11-22T02:43:21 EligibleTime=2026-11-22T02:43:21 DerivedExitCode=0:0 ExitCode=0:0\n"
	}
	run := runnerFunc(func(ctx context.Context, argv []string, _ io.Reader) (backends.Result, error) {
		if cmdName(argv) == "grep" {
			return backends.Result{Stdout: []byte(line("41", "/scratch/other-broker/gridsub/"+tag) + line("42", "/scratch/mine/gridsub/"+tag))}, nil
		}
		return backends.Result{}, nil // squeue: nothing live
	})
	b := New(Config{Name: "siteA", RemoteDir: "/scratch/mine", JobCompFile: "/var/log/jobcomp.txt"}, run, nil)
	got, err := b.FindByGridID(context.Background(), tag)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "42" {
		t.Fatalf("found %+v, want only job 42 from /scratch/mine", got)
	}
}
