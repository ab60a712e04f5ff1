package frontend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/batchscript"
)

// pbsServer is the server name in the PBS front-ends' ids ("42.gridsub").
const pbsServer = "gridsub"

func runQsub(ctx context.Context, g *Env, args []string) error {
	opts, rest := batchscript.SplitArgs(batchscript.PBS, args)
	var data []byte
	file, name := "", ""
	switch {
	case len(rest) > 1:
		return feFail("qsub", "one script at a time; qsub passes no arguments to a script (use -v NAME=VALUE)")
	case len(rest) == 1:
		var err error
		file = rest[0]
		if data, err = batchscript.ReadFile(file); err != nil {
			return feFail("qsub", "script file:: %v", err)
		}
		name = filepath.Base(file)
	default:
		var err error
		if data, err = io.ReadAll(io.LimitReader(os.Stdin, batchscript.MaxScript+1)); err != nil {
			return feFail("qsub", "reading the script from standard input: %v", err)
		}
		file, name = "(stdin)", "STDIN"
	}
	spec, err := batchscript.Parse(file, data, batchscript.Options{Args: opts, Dialect: batchscript.PBS, Environ: os.Environ(), DefaultName: name})
	if err != nil {
		return feFail("qsub", "%v", err)
	}
	c, err := feConnect(ctx, g, "qsub")
	if err != nil {
		return err
	}
	id, err := c.submitSpec(ctx, spec, file)
	if err != nil {
		return feFail("qsub", "%v", err)
	}
	fmt.Fprintf(g.Stdout, "%s.%s\n", id, pbsServer)
	return nil
}

// pbsState is a job's state letter in qstat.
func pbsState(j *bridge.Job) string {
	switch j.State {
	case bridge.Running:
		return "R"
	case bridge.Held:
		return "H"
	case bridge.Reserved:
		return "W"
	case bridge.Submitting, bridge.Dispatched, bridge.Queued:
		return "Q"
	}
	return "F"
}

func runQstat(ctx context.Context, g *Env, args []string) error {
	fs := pflag.NewFlagSet("qstat", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	full := fs.BoolP("full", "f", false, "")
	finished := fs.BoolP("x", "x", false, "")
	history := fs.BoolP("H", "H", false, "")
	users := fs.StringP("u", "u", "", "")
	fs.BoolP("w", "w", false, "")
	fs.BoolP("t", "t", false, "")
	fs.BoolP("J", "J", false, "")
	if err := fs.Parse(args); err != nil {
		return feFail("qstat", "%v", err)
	}
	c, err := feConnect(ctx, g, "qstat")
	if err != nil {
		return err
	}
	ids := strings.Join(fs.Args(), ",")
	js, err := c.selectJobs(ctx, ids, func(j *bridge.Job) bool {
		return ids != "" || *finished || *history || !j.State.Final()
	})
	if err != nil {
		return feFail("qstat", "%v", err)
	}
	if ids != "" && len(js) == 0 {
		return feFail("qstat", "Unknown Job Id %s", fs.Arg(0))
	}
	me := currentUser()
	if !inList(*users, me) {
		js = nil
	}
	var b strings.Builder
	if *full {
		for _, j := range js {
			fmt.Fprintf(&b, "Job Id: %s.%s\n", FrontID(c.prefix, j.ID), pbsServer)
			kv := [][2]string{
				{"Job_Name", j.Req.Name}, {"Job_Owner", me + "@" + pbsServer}, {"job_state", pbsState(j)},
				{"queue", partition(j)}, {"server", pbsServer},
				{"ctime", pbsTime(j.Submit)}, {"qtime", pbsTime(j.Submit)},
				{"Resource_List.walltime", pbsDuration(j.Req.Estimate)},
				{"Resource_List.nodect", strconv.Itoa(j.Req.Nodes)},
				{"Resource_List.ncpus", strconv.Itoa(j.Req.Nodes * max(j.Req.CoresPerNode, 1))},
				{"resources_used.walltime", pbsDuration(elapsed(j, c.now))},
			}
			if !j.Start.IsZero() {
				kv = append(kv, [2]string{"stime", pbsTime(j.Start)}, [2]string{"exec_host", sitesOf(j)})
			}
			if j.State.Final() {
				kv = append(kv, [2]string{"Exit_status", strconv.Itoa(pbsExit(j))}, [2]string{"mtime", pbsTime(j.End)})
			}
			if j.Parent != "" {
				kv = append(kv, [2]string{"array_index", strconv.Itoa(j.Index)})
			}
			kv = append(kv, [2]string{"gridsub_id", j.ID})
			for _, p := range kv {
				fmt.Fprintf(&b, "    %s = %s\n", p[0], p[1])
			}
			b.WriteByte('\n')
		}
	} else if len(js) > 0 {
		b.WriteString("Job id            Name             User              Time Use S Queue\n")
		b.WriteString("----------------  ---------------- ----------------  -------- - -----\n")
		for _, j := range js {
			fmt.Fprintf(&b, "%-17s %-16s %-16s  %8s %s %s\n", cut(FrontID(c.prefix, j.ID)+"."+pbsServer, 17), cut(j.Req.Name, 16),
				cut(me, 16), pbsDuration(elapsed(j, c.now)), pbsState(j), cut(partition(j), 16))
		}
	}
	_, err = io.WriteString(g.Stdout, b.String())
	return err
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "*"
	}
	return s
}

func pbsTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("Mon Jan _2 15:04:05 2006")
}

func pbsDuration(d time.Duration) string {
	s := int64(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// pbsExit is PBS's Exit_status: the exit code, or PBS's codes for a job
// that did not end by itself (-1 lost, 271 cancelled, -11 walltime).
func pbsExit(j *bridge.Job) int {
	switch {
	case j.State == bridge.Cancelled:
		return 271
	case isTimeout(j):
		return -11
	case j.ExitCode < 0:
		return -1
	}
	return j.ExitCode
}

func runQdel(ctx context.Context, g *Env, args []string) error {
	ids := slices.DeleteFunc(slices.Clone(args), func(s string) bool { return s == "-W" || s == "force" || s == "-x" })
	if len(ids) == 0 {
		return feFail("qdel", "usage: qdel job_identifier...")
	}
	c, err := feConnect(ctx, g, "qdel")
	if err != nil {
		return err
	}
	bad := 0
	for _, id := range ids {
		_, err := c.Cancel(ctx, gridID(c.prefix, id))
		switch {
		case err == nil:
		case errors.Is(err, bridge.ErrFinal):
			fmt.Fprintf(g.Stderr, "qdel: Job has finished %s\n", id)
		case errors.Is(err, bridge.ErrNotFound):
			bad++
			fmt.Fprintf(g.Stderr, "qdel: Unknown Job Id %s\n", id)
		default:
			return feFail("qdel", "%s: %v", id, err)
		}
	}
	if bad > 0 {
		return &Error{Prog: "qdel", Code: 1}
	}
	return nil
}
