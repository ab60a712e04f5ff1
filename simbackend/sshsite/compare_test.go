package sshsite

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/pbs"
	"github.com/gridsub/gridsub/backends/pbs/pbslock"
	"github.com/gridsub/gridsub/backends/slurm"
	"github.com/gridsub/gridsub/backends/transport"
)

// The comparison tests run one scenario through the same backend against a
// real batch system (the SLURM testbed, the OpenPBS testbed) and against
// the simulated dialect, and compare what the backend and its parsers
// made of both, normalised (ids, times and host names differ; states,
// exit codes, tags, which fields are set and the errors do not). Without
// the testbeds they skip.

// trace is a scenario's normalised record.
type trace []string

func (tr *trace) add(format string, a ...any) { *tr = append(*tr, fmt.Sprintf(format, a...)) }

func normStatus(st backends.JobStatus, gridID string) string {
	return fmt.Sprintf("state=%s exit=%d grid=%v start=%v end=%v nodes=%v", st.State, st.ExitCode,
		st.GridID == gridID && gridID != "", !st.Start.IsZero(), !st.End.IsZero(), st.NodeList != "")
}

type runFn func(ctx context.Context, argv []string) (backends.Result, error)

// scenario: Info; three jobs (exit 0, exit 3, a long one); their statuses
// once the short ones ended and the long one runs; FindByGridID; Cancel;
// the cancelled status; a status of an unknown id.
func scenario(t *testing.T, b backends.Backend, unknown backends.JobID) (trace, []backends.JobID) {
	ctx := context.Background()
	var tr trace
	info, err := b.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	tr.add("info kind=%s nodes>0=%v cores>0=%v partitions>0=%v", info.Kind, info.Nodes > 0, info.CoresPerNode > 0, len(info.Partitions) > 0)
	mk := func(code, secs int) *backends.JobSpec {
		return &backends.JobSpec{GridID: gridID("cmp"), Components: 1, Name: "cmpjob", Nodes: 1, Walltime: 5 * time.Minute,
			Script: fmt.Sprintf("echo out; echo err >&2; sleep %d; exit %d\n", secs, code)}
	}
	specs := []*backends.JobSpec{mk(0, 1), mk(3, 1), mk(0, 600)}
	var ids []backends.JobID
	for _, sp := range specs {
		id, err := b.Submit(ctx, sp)
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		ids = append(ids, id)
	}
	deadline := time.Now().Add(3 * time.Minute)
	var sts []backends.JobStatus
	for {
		sts, err = b.Status(ctx, ids)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		// Real PBS shows a job R for a moment before its stime is set:
		// compare the settled state.
		if sts[0].State.Final() && sts[1].State.Final() && sts[2].State == backends.StateRunning && !sts[2].Start.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			for _, id := range ids {
				b.Cancel(ctx, id)
			}
			t.Fatalf("jobs not where the scenario needs them after 3 minutes: %+v", sts)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for i, st := range sts {
		tr.add("status %d: %s", i, normStatus(st, specs[i].GridID))
	}
	found, ok := backends.AsFinder(b)
	if !ok {
		t.Fatal("backend is no Finder")
	}
	fs, ferr := found.FindByGridID(ctx, specs[2].GridID)
	if ferr != nil {
		t.Fatalf("FindByGridID: %v", ferr)
	}
	tr.add("find: %d", len(fs))
	for _, f := range fs {
		tr.add("found: %s id-matches=%v", normStatus(f, specs[2].GridID), f.ID == ids[2])
	}
	if err := b.Cancel(ctx, ids[2]); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	// PBS ends a deleted running job after its kill delay: give it its own
	// two minutes.
	deadline = time.Now().Add(2 * time.Minute)
	for {
		sts, err = b.Status(ctx, ids[2:])
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if sts[0].State.Final() || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	tr.add("cancelled: state=%s", sts[0].State)
	tr.add("cancel again: err=%v", b.Cancel(ctx, ids[2]))
	sts, err = b.Status(ctx, []backends.JobID{unknown})
	tr.add("unknown: err=%v state=%s", err, sts[0].State)
	return tr, ids
}

func compareTraces(t *testing.T, real, sim trace) {
	t.Helper()
	if !reflect.DeepEqual(real, sim) {
		t.Errorf("the backend reads the real system and the simulated dialect differently:\nreal: %s\nsim:  %s",
			strings.Join(real, "\n      "), strings.Join(sim, "\n      "))
	}
}

// exitClass is what a caller can tell from a failed command: its exit
// status and whether it is an error at all.
func exitClass(r backends.Result) string { return strconv.Itoa(r.ExitCode) }

func TestSLURMDialectMatchesRealSLURM(t *testing.T) {
	key := os.Getenv("GRIDSUB_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_SITEA_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no SLURM testbed: source /var/tmp/gridsub-local-testbed/testbed.env to compare the SLURM dialect with real SLURM")
	}
	t.Parallel()
	ctx := context.Background()
	rc, err := transport.Dial(ctx, transport.Config{Host: os.Getenv("GRIDSUB_SSH_HOST"), Port: port, User: os.Getenv("GRIDSUB_SSH_USER"),
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_SSH_KNOWN_HOSTS")}, MaxSessions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	realB := slurm.New(slurm.Config{Name: "siteA", RemoteDir: os.Getenv("GRIDSUB_SITEA_SCRATCH") + "/simsite-compare",
		User: os.Getenv("GRIDSUB_SSH_USER")}, rc, func(root string) backends.Stager { return rc.Stager(root) })
	s := startSite(t, SLURM, 8, 2, 1)
	simB, closeB, err := s.Backend(ctx, s.key, s.known, "simsite-compare")
	if err != nil {
		t.Fatal(err)
	}
	defer closeB()
	sc, err := transport.Dial(ctx, s.Transport(s.key, s.known))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	realTr, realIDs := scenario(t, realB, "999999")
	simTr, simIDs := scenario(t, simB, "999999")
	compareTraces(t, realTr, simTr)

	// The raw commands, parsed by the backend's parsers.
	raw := func(c *transport.Client, ids []backends.JobID) trace {
		var tr trace
		r, err := c.Run(ctx, slurm.SqueueArgv(ids[:2]), nil)
		if err != nil {
			t.Fatal(err)
		}
		recs, perr := slurm.ParseSqueue(r.Stdout)
		tr.add("squeue exit=%s parse=%v n=%d", exitClass(r), perr, len(recs))
		for _, rec := range recs {
			tr.add("  state=%s limit=%s nodes=%d part>0=%v comment=%v name=%q", rec.RawState, rec.TimeLimit, rec.Nodes,
				rec.Partition != "", strings.HasPrefix(rec.Comment, "gridsub:"), rec.Name)
		}
		r, _ = c.Run(ctx, slurm.SqueueArgv([]backends.JobID{"999999"}), nil)
		tr.add("squeue unknown exit=%s invalid=%v", exitClass(r), strings.Contains(slurm.Message(r), "Invalid job id specified"))
		r, _ = c.Run(ctx, slurm.SinfoArgv(), nil)
		nodes, perr := slurm.ParseSinfo(r.Stdout)
		tr.add("sinfo exit=%s parse=%v any=%v", exitClass(r), perr, len(nodes) > 0)
		for _, n := range nodes {
			if !slurm.NodeUsable(n.State) {
				tr.add("  unusable node %s (%s)", n.Node, n.State)
			}
		}
		r, _ = c.Run(ctx, slurm.ScontrolJobArgv(ids[1]), nil)
		js, perr := slurm.ParseScontrolJobs(r.Stdout, time.Local)
		tr.add("scontrol show job exit=%s parse=%v n=%d", exitClass(r), perr, len(js))
		for _, j := range js {
			tr.add("  %s", normStatus(j, ""))
		}
		r, _ = c.Run(ctx, slurm.ScancelArgv("999999"), nil)
		tr.add("scancel unknown exit=%s invalid=%v", exitClass(r), strings.Contains(slurm.Message(r), "Invalid job id"))
		r, _ = c.Run(ctx, slurm.ShowReservationArgv("nosuchresv"), nil)
		tr.add("show missing reservation exit=%s notfound=%v", exitClass(r), strings.Contains(slurm.Message(r), "not found"))
		r, _ = c.Run(ctx, slurm.DeleteReservationArgv("nosuchresv"), nil)
		tr.add("delete missing reservation exit=%s invalid=%v", exitClass(r), strings.Contains(slurm.Message(r), "Requested reservation is invalid"))
		return tr
	}
	compareTraces(t, raw(rc, realIDs), raw(sc, simIDs))
}

func TestPBSDialectMatchesRealOpenPBS(t *testing.T) {
	key := os.Getenv("GRIDSUB_PBS_SSH_KEY")
	port, _ := strconv.Atoi(os.Getenv("GRIDSUB_PBS_SSH_PORT"))
	if key == "" || port == 0 {
		t.Skip("no OpenPBS testbed: source /var/tmp/gridsub-pbs/testbed.env to compare the PBS dialect with real OpenPBS")
	}
	pbslock.Hold(t)
	t.Parallel()
	ctx := context.Background()
	user := os.Getenv("GRIDSUB_PBS_SSH_USER")
	rc, err := transport.Dial(ctx, transport.Config{Host: os.Getenv("GRIDSUB_PBS_SSH_HOST"), Port: port, User: user,
		KeyFiles: []string{key}, KnownHosts: []string{os.Getenv("GRIDSUB_PBS_SSH_KNOWN_HOSTS")}, MaxSessions: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	bin := os.Getenv("GRIDSUB_PBS_BIN")
	realB := pbs.New(pbs.Config{Name: "pbs", RemoteDir: os.Getenv("GRIDSUB_PBS_HOME_DIR") + "/simsite-compare", User: user,
		BinDir: bin, Location: time.Local}, rc, func(root string) backends.Stager { return rc.Stager(root) })
	// The real server has one vnode of GRIDSUB_PBS_NCPUS CPUs; so has the
	// simulated one.
	ncpus, _ := strconv.Atoi(os.Getenv("GRIDSUB_PBS_NCPUS"))
	s := startSite(t, PBS, 3, max(ncpus, 1), 1)
	simB, closeB, err := s.Backend(ctx, s.key, s.known, "simsite-compare")
	if err != nil {
		t.Fatal(err)
	}
	defer closeB()
	sc, err := transport.Dial(ctx, s.Transport(s.key, s.known))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	realTr, realIDs := scenario(t, realB, backends.JobID("999999."+os.Getenv("GRIDSUB_PBS_SERVER")))
	simTr, simIDs := scenario(t, simB, backends.JobID("999999."+s.cfg.Name))
	compareTraces(t, realTr, simTr)

	raw := func(c *transport.Client, binDir, server string, ids []backends.JobID) trace {
		var tr trace
		cmds := pbs.Cmds{Bin: binDir}
		r, _ := c.Run(ctx, cmds.StatusArgv(ids), nil)
		recs, perr := pbs.ParseDSV(r.Stdout)
		tr.add("qstat dsv exit=%s parse=%v n=%d", exitClass(r), perr, len(recs))
		want := []string{"Job_Name", "Job_Owner", "job_state", "queue", "Resource_List.walltime", "Resource_List.nodect",
			"stime", "substate", "Variable_List", "Exit_status", "obittime", "exec_vnode", "Output_Path", "Error_Path"}
		for _, rec := range recs {
			var has []string
			for _, k := range want {
				if _, ok := rec.Attrs[k]; ok {
					has = append(has, k)
				}
			}
			st, err := rec.Status(time.Local)
			tr.add("  attrs=%v tag=%v workdir=%v status=%s err=%v", has, strings.HasPrefix(rec.Vars[pbs.TagVar], "g:"),
				rec.Vars["PBS_O_WORKDIR"] != "", normStatus(st, ""), err)
		}
		r, _ = c.Run(ctx, cmds.ActiveJSONArgv(), nil)
		jrecs, perr := pbs.ParseJobsJSON(r.Stdout)
		tr.add("qstat json exit=%s parse=%v", exitClass(r), perr)
		_ = jrecs
		r, _ = c.Run(ctx, cmds.NodesArgv(), nil)
		nodes, perr := pbs.ParsePbsnodes(r.Stdout)
		usable := slices.ContainsFunc(nodes, func(n pbs.Node) bool { return n.Usable() && n.NCPUs > 0 })
		tr.add("pbsnodes exit=%s parse=%v usable=%v", exitClass(r), perr, usable)
		r, _ = c.Run(ctx, cmds.ServerArgv(), nil)
		srv, perr := pbs.ParseServer(r.Stdout)
		tr.add("qstat -B exit=%s parse=%v queue=%q history=%v", exitClass(r), perr, srv.DefaultQueue, srv.History)
		r, _ = c.Run(ctx, cmds.QueuesArgv(), nil)
		qs, perr := pbs.ParseQueues(r.Stdout)
		tr.add("qstat -Q exit=%s parse=%v workq=%v", exitClass(r), perr,
			slices.ContainsFunc(qs, func(q pbs.Queue) bool { return q.Name == "workq" && q.Enabled && q.Started }))
		r, _ = c.Run(ctx, []string{cmds.StatusArgv(nil)[0], "-x", "-f", "-F", "dsv", "999999." + server}, nil)
		tr.add("qstat unknown exit=%s unknown=%d", exitClass(r), len(pbs.UnknownJobIDs(r.Stderr)))
		r, _ = c.Run(ctx, cmds.QdelArgv(ids[0]), nil)
		tr.add("qdel finished exit=%s finished=%v", exitClass(r), strings.Contains(pbs.Message(r), "Job has finished"))
		r, _ = c.Run(ctx, cmds.RdelArgv("R999999"), nil)
		tr.add("pbs_rdel unknown exit=%s unknown=%v", exitClass(r), strings.Contains(pbs.Message(r), "Unknown Reservation Id"))
		return tr
	}
	compareTraces(t, raw(rc, bin, os.Getenv("GRIDSUB_PBS_SERVER"), realIDs), raw(sc, s.Bin(), s.cfg.Name, simIDs))
}
