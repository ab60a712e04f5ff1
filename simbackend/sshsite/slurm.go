package sshsite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/slurm"
)

// out collects a command's output.
type out struct{ stdout, stderr limBuf } // each at most maxOutput bytes

func (o *out) errf(code int, format string, a ...any) int {
	fmt.Fprintf(&o.stderr, format, a...)
	if !strings.HasSuffix(format, "\n") {
		o.stderr.WriteByte('\n')
	}
	return code
}

// partition is the one partition of a SLURM-dialect site.
const partition = "batch"

// slurmAnswers answer the SLURM dialect's commands (slurmCmds).
var slurmAnswers = map[string]cmdFunc{
	"sbatch":  (*Site).sbatch,
	"squeue":  (*Site).squeue,
	"sinfo":   func(s *Site, o *out, a []string, _ request) int { return s.sinfo(o, a) },
	"scancel": func(s *Site, o *out, a []string, _ request) int { return s.scancel(o, a) },
	"sacct": func(_ *Site, o *out, _ []string, _ request) int {
		return o.errf(1, "Slurm accounting storage is disabled")
	},
	"scontrol": (*Site).scontrol,
}

// longOpt splits "--name=value" or "--name value" (consuming the next
// word) from a; ok is false when a[i] is not a long option of that name.
func longOpt(a []string, i *int, name string) (string, bool) {
	w := a[*i]
	if v, ok := strings.CutPrefix(w, "--"+name+"="); ok {
		return v, true
	}
	if w == "--"+name && *i+1 < len(a) {
		*i++
		return a[*i], true
	}
	return "", false
}

func absIn(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}

// maxScript bounds a job script read from a file or from stdin.
const maxScript = 1 << 20

// sbatch reads the options backends/slurm sends (long forms, "=" or a
// separate word) and the script: a path, or with none its standard input.
func (s *Site) sbatch(o *out, a []string, req request) int {
	j := &job{queue: partition, nodes: 1, walltime: time.Hour, dir: req.Cwd, user: req.Env["USER"]}
	var outp, errp string
	exclusive := false
	ntasks := 1
	var script string
	for i := 0; i < len(a); i++ {
		w := a[i]
		if v, ok := longOpt(a, &i, "job-name"); ok {
			j.name = v
		} else if v, ok := longOpt(a, &i, "comment"); ok {
			j.comment = v
		} else if v, ok := longOpt(a, &i, "partition"); ok {
			j.queue = v
		} else if v, ok := longOpt(a, &i, "reservation"); ok {
			j.resv = v
		} else if v, ok := longOpt(a, &i, "nodes"); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return o.errf(1, "sbatch: error: Invalid node count specification")
			}
			j.nodes = n
		} else if v, ok := longOpt(a, &i, "ntasks-per-node"); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return o.errf(1, "sbatch: error: Invalid --ntasks-per-node specification")
			}
			ntasks = n
		} else if v, ok := longOpt(a, &i, "cpus-per-task"); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return o.errf(1, "sbatch: error: Invalid --cpus-per-task argument: %s", v)
			}
			j.cpus = n
		} else if v, ok := longOpt(a, &i, "time"); ok {
			d, ok := slurmMinutes(v)
			if !ok {
				return o.errf(1, "sbatch: error: Invalid time limit specification")
			}
			j.walltime = d
		} else if v, ok := longOpt(a, &i, "output"); ok {
			outp = v
		} else if v, ok := longOpt(a, &i, "error"); ok {
			errp = v
		} else if v, ok := longOpt(a, &i, "chdir"); ok {
			j.dir = absIn(req.Cwd, v)
		} else if w == "--exclusive" || w == "--parsable" {
			exclusive = exclusive || w == "--exclusive"
		} else if strings.HasPrefix(w, "-") {
			o.errf(255, "sbatch: unrecognized option '%s'", w)
			return o.errf(255, "Try \"sbatch --help\" for more information")
		} else {
			script = w
			if i != len(a)-1 {
				return o.errf(1, "sbatch: error: script arguments are not supported by this site")
			}
		}
	}
	var body []byte
	if script == "" {
		// No script file: like the real sbatch, the script is its
		// standard input (a batch's here-document).
		var err error
		if req.stdin != nil {
			body, err = req.stdin(maxScript)
		}
		if errors.Is(err, errStdinTooLarge) {
			return o.errf(1, "sbatch: error: Batch script is too large (over %d bytes)", maxScript)
		}
		if err != nil || len(body) == 0 {
			return o.errf(1, "sbatch: error: Batch script is empty!")
		}
		j.script = "sbatch"
	} else {
		j.script = absIn(req.Cwd, script)
		var err error
		body, err = s.readHome(j.script, maxScript)
		if err != nil {
			return o.errf(1, "sbatch: error: Batch script is empty!")
		}
	}
	j.body = body
	if !bytes.HasPrefix(body, []byte("#!")) {
		return o.errf(1, "sbatch: error: This does not look like a batch script.  The first\nsbatch: error: line must start with #! followed by the path to an interpreter.\nsbatch: error: For instance: #!/bin/sh")
	}
	if j.queue != partition {
		return o.errf(1, "sbatch: error: Batch job submission failed: Invalid partition name specified")
	}
	if j.cpus*ntasks > s.cfg.Cores || j.nodes > s.cfg.Nodes {
		return o.errf(1, "sbatch: error: Batch job submission failed: More processors requested than permitted")
	}
	if exclusive || j.cpus == 0 {
		j.cpus = s.cfg.Cores
	}
	if outp == "" {
		outp = "slurm-%j.out"
	}
	if errp == "" {
		errp = outp
	}
	j.gridID = slurm.GridFromTag(j.comment)
	if j.name == "" {
		j.name = filepath.Base(j.script)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.resv != "" && s.resvs[j.resv] == nil {
		return o.errf(1, "sbatch: error: Batch job submission failed: Requested reservation is invalid")
	}
	if j.resv != "" {
		j.resv = s.resvs[j.resv].simID
	}
	if err := s.submitLocked(j); err != nil {
		if errors.Is(err, backends.ErrRejected) {
			return o.errf(1, "sbatch: error: Batch job submission failed: Requested reservation is invalid")
		}
		return o.errf(1, "sbatch: error: Batch job submission failed: %v", err)
	}
	j.native = string(j.id)
	j.out = absIn(j.dir, strings.ReplaceAll(outp, "%j", j.native))
	j.err = absIn(j.dir, strings.ReplaceAll(errp, "%j", j.native))
	fmt.Fprintf(&o.stdout, "%s\n", j.native)
	return 0
}

// readHome reads a file below the home through the root, at most max bytes.
func (s *Site) readHome(p string, max int64) ([]byte, error) {
	rel, err := (&rootFS{home: s.home, root: s.root}).rel(p)
	if err != nil {
		return nil, err
	}
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, max)
	n, _ := f.Read(b)
	return b[:n], nil
}

// slurmMinutes reads --time: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]].
func slurmMinutes(v string) (time.Duration, bool) {
	days := 0
	if d, rest, ok := strings.Cut(v, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, false
		}
		days, v = n, rest
	}
	p := strings.Split(v, ":")
	var n [3]int
	for i, f := range p {
		x, err := strconv.Atoi(f)
		if err != nil || x < 0 || i > 2 {
			return 0, false
		}
		n[i] = x
	}
	var d time.Duration
	switch {
	case days > 0 && len(p) == 1:
		d = time.Duration(n[0]) * time.Hour
	case days > 0 && len(p) == 2:
		d = time.Duration(n[0])*time.Hour + time.Duration(n[1])*time.Minute
	case len(p) == 1:
		d = time.Duration(n[0]) * time.Minute
	case len(p) == 2:
		d = time.Duration(n[0])*time.Minute + time.Duration(n[1])*time.Second
	default:
		d = time.Duration(n[0])*time.Hour + time.Duration(n[1])*time.Minute + time.Duration(n[2])*time.Second
	}
	d += time.Duration(days) * 24 * time.Hour
	return d, d > 0
}

// fmtLimit prints a time limit as squeue does: M:SS, H:MM:SS or D-HH:MM:SS.
func fmtLimit(d time.Duration) string {
	t := int64(d / time.Second)
	days, h, m, sec := t/86400, t/3600%24, t/60%60, t%60
	switch {
	case days > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, sec)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

func slurmState(st backends.JobStatus) string {
	switch st.State {
	case backends.StatePending:
		return "PENDING"
	case backends.StateRunning:
		return "RUNNING"
	case backends.StateCompleted:
		return "COMPLETED"
	case backends.StateFailed:
		return "FAILED"
	case backends.StateCancelled:
		return "CANCELLED"
	case backends.StateTimeout:
		return "TIMEOUT"
	}
	return "PENDING"
}

var shortStates = map[string]string{"PD": "PENDING", "R": "RUNNING", "CD": "COMPLETED", "F": "FAILED",
	"CA": "CANCELLED", "TO": "TIMEOUT", "CF": "CONFIGURING", "CG": "COMPLETING", "S": "SUSPENDED"}

// slurmTime prints a time as SLURM does under SLURM_TIME_FORMAT.
func slurmTime(t time.Time, req request) string {
	if t.IsZero() {
		return "N/A"
	}
	if req.Env["SLURM_TIME_FORMAT"] == "%s" {
		return strconv.FormatInt(t.Unix(), 10)
	}
	return t.Local().Format("2006-01-02T15:04:05")
}

// squeueField prints one -O field of a job.
func (s *Site) squeueField(f string, j *job, st backends.JobStatus, req request) (string, bool) {
	switch strings.ToLower(f) {
	case "jobid", "jobidraw", "jobarrayid":
		return j.native, true
	case "state", "statecompact":
		return slurmState(st), true
	case "reason":
		r := st.Reason
		if r == "" || st.State == backends.StateRunning || st.State == backends.StateCompleted || st.State == backends.StateCancelled {
			r = "None"
		}
		return r, true
	case "exit_code", "exitcode":
		switch {
		case st.State == backends.StateCancelled:
			return "15", true
		case st.State == backends.StateTimeout:
			return strconv.Itoa(143 << 8), true
		case st.State.Final() && st.ExitCode >= 0:
			return strconv.Itoa(st.ExitCode&0xff<<8 | 0), true
		}
		return "0", true
	case "starttime":
		return slurmTime(st.Start, req), true
	case "endtime":
		switch {
		case st.State.Final():
			return slurmTime(st.End, req), true
		case !st.Start.IsZero():
			return slurmTime(st.Start.Add(j.walltime), req), true
		}
		return "N/A", true
	case "timelimit":
		return fmtLimit(j.walltime), true
	case "numnodes":
		return strconv.Itoa(j.nodes), true
	case "nodelist":
		return s.nodeList(j), true
	case "partition":
		return j.queue, true
	case "comment":
		return j.comment, true
	case "name":
		return j.name, true
	case "username":
		return j.user, true
	}
	return "", false
}

type oField struct{ name, suffix string }

// parseO reads squeue -O "Field:width<suffix>,..." (a width of 0 or none:
// the value as it is; otherwise padded/cut to width).
func parseO(spec string) ([]oField, []int, bool) {
	var fs []oField
	var ws []int
	for _, p := range strings.Split(spec, ",") {
		name, rest, _ := strings.Cut(p, ":")
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		w, err := strconv.Atoi(rest[:i])
		if name == "" || (i > 0 && (err != nil || w > maxFieldWidth)) {
			return nil, nil, false // a width over maxFieldWidth is refused, not padded to
		}
		fs = append(fs, oField{name, rest[i:]})
		ws = append(ws, w)
	}
	return fs, ws, true
}

func (s *Site) squeue(o *out, a []string, req request) int {
	format := "JobID:0 ,Partition:0 ,Name:0 ,UserName:0 ,State:0 ,TimeLimit:0 ,NumNodes:0 ,NodeList:0"
	var ids []string
	var states map[string]bool
	header := true
	for i := 0; i < len(a); i++ {
		switch w := a[i]; {
		case w == "-h" || w == "--noheader":
			header = false
		case w == "--me", w == "-r", w == "--array": // the simulated site has no arrays: one line per job either way
		case (w == "-t" || w == "--states") && i+1 < len(a):
			i++
			if strings.ToLower(a[i]) != "all" {
				states = map[string]bool{}
				for _, x := range strings.Split(strings.ToUpper(a[i]), ",") {
					if l, ok := shortStates[x]; ok {
						x = l
					}
					states[x] = true
				}
			}
		case (w == "-j" || w == "--jobs") && i+1 < len(a):
			i++
			ids = strings.Split(a[i], ",")
			for _, id := range ids {
				if id == "" || strings.Trim(id, "0123456789") != "" {
					return o.errf(1, "squeue: error: Invalid job id: %s", id)
				}
			}
		case (w == "-O" || w == "--Format") && i+1 < len(a):
			i++
			format = a[i]
		default:
			return o.errf(1, "squeue: unrecognized option '%s'\nTry \"squeue --help\" for more information", w)
		}
	}
	fields, widths, ok := parseO(format)
	if !ok {
		return o.errf(1, "squeue: error: Invalid job format specification: %s", format)
	}
	s.mu.Lock()
	var js []*job
	if ids != nil {
		for _, id := range ids {
			if j := s.jobs[backends.JobID(id)]; j != nil && !slices.Contains(js, j) {
				js = append(js, j)
			}
		}
	} else {
		js = append(js, s.order...)
	}
	s.mu.Unlock()
	idl := make([]backends.JobID, len(js))
	for i, j := range js {
		idl[i] = j.id
	}
	sts := s.status(idl)
	now := s.eng.Now()
	if header {
		for i, f := range fields {
			o.stdout.WriteString(strings.ToUpper(f.name) + f.suffix)
			_ = i
		}
		o.stdout.WriteByte('\n')
	}
	n := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range js {
		st := sts[j.id]
		if st.State == backends.StateLost || !s.visible(st, now) {
			continue
		}
		if states != nil && !states[slurmState(st)] {
			continue
		}
		n++
		for i, f := range fields {
			v, ok := s.squeueField(f.name, j, st, req)
			if !ok {
				o.stdout.Reset()
				return o.errf(1, "squeue: error: Invalid job format specification: %s", f.name)
			}
			if w := widths[i]; w > 0 {
				if len(v) > w {
					v = v[:w]
				}
				v += strings.Repeat(" ", w-len(v))
			}
			o.stdout.WriteString(v + f.suffix)
		}
		o.stdout.WriteByte('\n')
	}
	if ids != nil && n == 0 && len(js) == 0 {
		return o.errf(1, "slurm_load_jobs error: Invalid job id specified")
	}
	return 0
}

func (s *Site) sinfo(o *out, a []string) int {
	format := "%P %a %l %D %t %N"
	for i := 0; i < len(a); i++ {
		switch w := a[i]; {
		case w == "-h" || w == "--noheader" || w == "-N" || w == "--Node":
		case (w == "-o" || w == "--format") && i+1 < len(a):
			i++
			format = a[i]
		default:
			return o.errf(1, "sinfo: unrecognized option '%s'\nTry \"sinfo --help\" for more information", w)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.free {
		state, short := "idle", "idle"
		if !s.free[i] {
			state, short = "allocated", "alloc"
		}
		r := strings.NewReplacer("%N", s.nodeName(i), "%P", partition+"*", "%c", strconv.Itoa(s.cfg.Cores),
			"%T", state, "%t", short, "%a", "up", "%l", "infinite", "%D", "1",
			"%m", "0", "%G", "(null)") // memory not modelled (0: unknown, never rules the site out), no GRES
		o.stdout.WriteString(r.Replace(format) + "\n")
	}
	return 0
}

func (s *Site) scancel(o *out, a []string) int {
	code := 0
	for _, id := range a {
		if strings.HasPrefix(id, "-") {
			return o.errf(1, "scancel: unrecognized option '%s'\nTry \"scancel --help\" for more information", id)
		}
		if id == "" || strings.Trim(id, "0123456789") != "" {
			code = o.errf(1, "scancel: error: Invalid job id %s", id)
			continue
		}
		// As SLURM 23 does: an unknown or ended job is no error and
		// prints nothing.
		s.mu.Lock()
		j := s.jobs[backends.JobID(id)]
		s.mu.Unlock()
		if j != nil {
			s.sim.Cancel(context.Background(), j.id)
		}
	}
	return code
}

// jobcompPath is the SLURM dialect's jobcomp/filetxt log.
func (s *Site) jobcompPath() string { return filepath.Join(filepath.Dir(s.home), "var", "jobcomp.txt") }

// jobEnded records an ended job (s.mu held): the SLURM dialect appends its
// line to the jobcomp log, as jobcomp/filetxt does.
func (s *Site) jobEnded(j *job, st backends.JobStatus) {
	if s.cfg.Dialect != SLURM {
		return
	}
	code, sig := 0, 0
	switch {
	case st.State == backends.StateCancelled || st.State == backends.StateTimeout:
		sig = 15
	case st.ExitCode >= 0:
		code = st.ExitCode
	}
	iso := func(t time.Time) string {
		if t.IsZero() {
			return "Unknown"
		}
		return t.Local().Format("2006-01-02T15:04:05")
	}
	line := fmt.Sprintf("JobId=%s UserId=%s(%d) GroupId=%s(%d) Name=%s JobState=%s Partition=%s TimeLimit=%d StartTime=%s EndTime=%s NodeList=%s NodeCnt=%d ProcCnt=%d WorkDir=%s ReservationName=%s Cluster=%s SubmitTime=%s EligibleTime=%s DerivedExitCode=0:0 ExitCode=%d:%d \n",
		j.native, j.user, os.Getuid(), j.user, os.Getgid(), j.name, slurmState(st), j.queue, int(j.walltime/time.Minute),
		iso(st.Start), iso(st.End), s.nodeList(j), j.nodes, j.nodes*j.cpus, j.dir, j.resvName(s), s.cfg.Name,
		iso(j.submit), iso(j.submit), code, sig)
	f, err := os.OpenFile(s.jobcompPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		s.log.Warn("jobcomp log", "err", err)
		return
	}
	f.WriteString(line)
	f.Close()
}

// jobEnv is the batch system's environment of a job.
func (s *Site) jobEnv(j *job) []string {
	if s.cfg.Dialect == SLURM {
		return []string{"SLURM_JOB_ID=" + j.native, "SLURM_JOBID=" + j.native, "SLURM_JOB_NAME=" + j.name,
			"SLURM_SUBMIT_DIR=" + j.dir, "SLURM_JOB_NODELIST=" + s.nodeList(j), "SLURM_JOB_NUM_NODES=" + strconv.Itoa(j.nodes),
			"SLURM_JOB_PARTITION=" + j.queue, "SLURM_CLUSTER_NAME=" + s.cfg.Name}
	}
	env := []string{"PBS_JOBID=" + j.native, "PBS_JOBNAME=" + j.name, "PBS_O_WORKDIR=" + j.dir, "PBS_QUEUE=" + j.queue,
		"PBS_O_HOME=" + s.home, "PBS_ENVIRONMENT=PBS_BATCH"}
	for k, v := range j.vars {
		env = append(env, k+"="+v)
	}
	return env
}
