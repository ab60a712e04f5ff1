//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package local

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func lines(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return strings.Count(string(b), "\n")
}

func findOne(t *testing.T, s *Site, gridID string) backends.JobStatus {
	t.Helper()
	got, err := s.FindByGridID(bg, gridID)
	if err != nil || len(got) != 1 {
		t.Fatalf("FindByGridID(%s) = %+v, %v; want one job", gridID, got, err)
	}
	return got[0]
}

// TestRestartFindsJobs: a new Site on the same root takes over every job
// the closed one had: a job that ended meanwhile is found with its exit
// code, a running one is re-attached and ends normally, a pending one runs
// (once), a running one past its walltime is killed, and new job ids do not
// repeat old ones.
func TestRestartFindsJobs(t *testing.T) {
	root, marks := t.TempDir(), t.TempDir()
	cfg := Config{Root: root, Slots: 3, KillGrace: 300 * time.Millisecond, Poll: 30 * time.Millisecond, Logger: quiet()}
	s1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mark := func(n string) string { return "echo x >> " + filepath.Join(marks, n) + "\n" }
	ended := script(mark("ended") + "sleep 0.3\nexit 3\n")
	running := script(mark("running") + "sleep 3\nexit 0\n")
	over := script(mark("over") + "sleep 300\n")
	over.Walltime = time.Second
	pending := script(mark("pending") + "exit 0\n")
	pending.Nodes = 3
	var old []backends.JobID
	for _, sp := range []*backends.JobSpec{ended, running, over, pending} {
		old = append(old, submit(t, s1, sp))
	}
	if st := status(t, s1, old[3]); st.State != backends.StatePending {
		t.Fatalf("3-slot job behind three running ones: %+v", st)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	// The first job ends, the third passes its walltime: nobody watches.
	waitExit(t, root, old[0])
	time.Sleep(time.Until(recordStart(t, root, old[2]).Add(over.Walltime + 100*time.Millisecond)))

	s2 := newSite(t, cfg)
	st := findOne(t, s2, ended.GridID)
	if st.State != backends.StateFailed || st.ExitCode != 3 || !strings.Contains(st.Reason, "down") {
		t.Errorf("job that ended while no site ran: %+v, want failed with exit code 3", st)
	}
	if st := findOne(t, s2, running.GridID); st.State != backends.StateRunning {
		t.Errorf("job still running at the restart: %+v, want running (re-attached)", st)
	}
	if st := waitFinal(t, s2, old[2], 5*time.Second); st.State != backends.StateTimeout {
		t.Errorf("job past its walltime at the restart: %+v, want timeout", st)
	}
	if st := waitFinal(t, s2, old[1], 10*time.Second); st.State != backends.StateCompleted || st.ExitCode != 0 {
		t.Errorf("re-attached job: %+v, want completed", st)
	}
	if st := waitFinal(t, s2, old[3], 10*time.Second); st.State != backends.StateCompleted {
		t.Errorf("job pending at the restart: %+v, want completed", st)
	}
	for _, n := range []string{"ended", "running", "over", "pending"} {
		if got := lines(t, filepath.Join(marks, n)); got != 1 {
			t.Errorf("job %s ran %d times, want once", n, got)
		}
	}
	id := submit(t, s2, script("exit 0\n"))
	for _, o := range old {
		if id == o {
			t.Fatalf("new job got the id %s of an earlier one", id)
		}
	}
	// Once every job has ended, no slot is held by one from before the
	// restart.
	waitFinal(t, s2, id, 10*time.Second)
	if info, _ := s2.Info(bg); info.FreeNodes != 3 || info.Running != 0 {
		t.Errorf("slots after the restart, every job ended: %+v", info)
	}
}

// waitExit waits until the wrapper of job id wrote its exit code.
func waitExit(t *testing.T, root string, id backends.JobID) {
	t.Helper()
	p := filepath.Join(root, stateDirName, string(id)+".exit")
	end := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(p); err == nil && strings.HasSuffix(string(b), "\n") {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("job %s wrote no exit code within 20s", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recordStart is the start time in job id's record.
func recordStart(t *testing.T, root string, id backends.JobID) time.Time {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, stateDirName, string(id)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.Start.IsZero() {
		t.Fatalf("record of job %s: %v (start %v)", id, err, r.Start)
	}
	return r.Start
}

// TestHelperSite is the plugin process TestRestartAfterSIGKILL kills: it
// opens a site, submits two jobs, prints their grid ids and waits.
func TestHelperSite(t *testing.T) {
	root := os.Getenv("LOCALSITE_HELPER_ROOT")
	if root == "" {
		t.Skip("the plugin process of TestRestartAfterSIGKILL, not a test of its own")
	}
	s, err := New(Config{Root: root, Slots: 2, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	marks := os.Getenv("LOCALSITE_HELPER_MARKS")
	short := script("echo x >> " + filepath.Join(marks, "short") + "\nsleep 0.3\nexit 4\n")
	long := script("echo x >> " + filepath.Join(marks, "long") + "\nsleep 4\nexit 5\n")
	line := "grid " + short.GridID + " " + long.GridID
	for _, sp := range []*backends.JobSpec{short, long} {
		id, err := s.Submit(bg, sp)
		if err != nil {
			t.Fatal(err)
		}
		line += " " + string(id)
	}
	os.Stdout.WriteString(line + "\n")
	time.Sleep(time.Minute)
}

// TestRestartAfterSIGKILL: the plugin process is SIGKILLed while its jobs
// run; its jobs do not die with it, and a new Site finds both: the one that
// ended meanwhile with its exit code, the one still running re-attached by
// pid until it ends with its own.
func TestRestartAfterSIGKILL(t *testing.T) {
	root, marks := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSite$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOCALSITE_HELPER_ROOT="+root, "LOCALSITE_HELPER_MARKS="+marks)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var short, long string
	var shortID backends.JobID
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 5 && f[0] == "grid" {
			short, long, shortID = f[1], f[2], backends.JobID(f[3])
			break
		}
	}
	if short == "" {
		t.Fatalf("the helper printed no grid ids (%v)", sc.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, out)
	cmd.Wait()
	waitExit(t, root, shortID) // the short job ends while no site runs

	s := newSite(t, Config{Root: root, Slots: 2})
	st := findOne(t, s, short)
	if st.State != backends.StateFailed || st.ExitCode != 4 {
		t.Errorf("job that ended after the plugin was killed: %+v, want failed with exit code 4", st)
	}
	st = findOne(t, s, long)
	if st.State != backends.StateRunning {
		t.Fatalf("job running when the plugin was killed: %+v, want running (re-attached)", st)
	}
	if info, _ := s.Info(bg); info.FreeNodes != 1 || info.Running != 1 {
		t.Errorf("Info with one re-attached job: %+v", info)
	}
	st = waitFinal(t, s, st.ID, 10*time.Second)
	if st.State != backends.StateFailed || st.ExitCode != 5 {
		t.Errorf("re-attached job: %+v, want failed with its exit code 5", st)
	}
	for _, n := range []string{"short", "long"} {
		if got := lines(t, filepath.Join(marks, n)); got != 1 {
			t.Errorf("job %s ran %d times, want once", n, got)
		}
	}
}

// writeRecord puts a job record into root as a Site left it.
func writeRecord(t *testing.T, root string, r record) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, stateDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, stateDirName, r.ID+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRevivedRecords: records left in odd states come back safely: a job
// whose pid now belongs to another process is not re-attached (nor that
// process signalled), a job caught while starting is lost (never run
// twice), a record from before a reboot is not trusted, and a broken
// record stops New with its path.
func TestRevivedRecords(t *testing.T) {
	root := t.TempDir()
	// A live process that is not the job: same pid, other start time.
	other := exec.Command("sleep", "30")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	base := record{V: recordVersion, Nodes: 1, Walltime: time.Hour, Exit: -1, Submit: time.Now(), Start: time.Now()}
	reused := base
	reused.ID, reused.GridID, reused.Tag, reused.State = "1", "reused", "reused", stRunning
	reused.Pid, reused.PidStart, reused.Kill = other.Process.Pid, procStart(other.Process.Pid)+1, killCancel
	starting := base
	starting.ID, starting.GridID, starting.Tag, starting.State = "2", "starting", "starting", stStarting
	rebooted := base
	rebooted.ID, rebooted.GridID, rebooted.Tag, rebooted.State = "3", "rebooted", "rebooted", stRunning
	rebooted.Pid, rebooted.PidStart, rebooted.Boot = other.Process.Pid, procStart(other.Process.Pid), "another-boot"
	for _, r := range []record{reused, starting, rebooted} {
		writeRecord(t, root, r)
	}
	s := newSite(t, Config{Root: root})
	if st := findOne(t, s, "reused"); st.State != backends.StateCancelled {
		t.Errorf("job whose pid was reused: %+v, want cancelled (its cancel was asked) without re-attaching", st)
	}
	if st := findOne(t, s, "starting"); st.State != backends.StateLost || !strings.Contains(st.Reason, "may or may not have run") {
		t.Errorf("job caught starting: %+v, want lost", st)
	}
	if st := findOne(t, s, "rebooted"); st.State != backends.StateFailed || !strings.Contains(st.Reason, "down") {
		t.Errorf("job from before a reboot: %+v, want failed (ended while the plugin was down)", st)
	}
	time.Sleep(600 * time.Millisecond) // past the kill grace: any SIGTERM/SIGKILL would have landed
	if gone(other.Process.Pid) {
		t.Fatal("the process that took over the job's pid was signalled")
	}
	if info, _ := s.Info(bg); info.FreeNodes != 1 {
		t.Errorf("slots held by jobs that are not running: %+v", info)
	}
	// A new job gets a fresh id.
	if id := submit(t, s, script("exit 0\n")); id != "4" {
		t.Errorf("new job id %s, want 4", id)
	}

	broken := t.TempDir()
	writeRecord(t, broken, base) // no id, no grid id
	os.Rename(filepath.Join(broken, stateDirName, ".json"), filepath.Join(broken, stateDirName, "7.json"))
	if _, err := New(Config{Root: broken}); err == nil || !strings.Contains(err.Error(), "7.json") {
		t.Errorf("broken record: %v, want an error naming it", err)
	}
}
