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
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/bridge/batchscript"
	"github.com/gridsub/gridsub/policy"
)

func runSbatch(ctx context.Context, g *Env, args []string) error {
	opts, rest := batchscript.SplitArgs(batchscript.SLURM, args)
	var wrap string
	hasWrap, parsable := false, false
	kept := opts[:0:0]
	for i := 0; i < len(opts); i++ {
		switch o := opts[i]; {
		case strings.HasPrefix(o, "--wrap="):
			wrap, hasWrap = strings.TrimPrefix(o, "--wrap="), true
		case o == "--wrap" && i+1 < len(opts):
			i++
			wrap, hasWrap = opts[i], true
		case o == "--parsable":
			parsable = true
		default:
			kept = append(kept, o)
		}
	}
	var data []byte
	file, name := "", ""
	var scriptArgs []string
	switch {
	case hasWrap:
		if len(rest) > 0 {
			return feFail("sbatch", "--wrap takes no script (got %q)", rest[0])
		}
		data, file, name = []byte("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n"+wrap+"\n"), "--wrap", "wrap"
	case len(rest) > 0:
		var err error
		file, scriptArgs = rest[0], rest[1:]
		if data, err = batchscript.ReadFile(file); err != nil {
			return feFail("sbatch", "unable to open file %v", err)
		}
		name = filepath.Base(file)
	default:
		var err error
		if data, err = io.ReadAll(io.LimitReader(os.Stdin, batchscript.MaxScript+1)); err != nil {
			return feFail("sbatch", "reading the script from standard input: %v", err)
		}
		file, name = "(stdin)", "sbatch"
	}
	spec, err := batchscript.Parse(file, data, batchscript.Options{Args: kept, Dialect: batchscript.SLURM, Environ: os.Environ(), DefaultName: name, ScriptArgs: scriptArgs})
	if err != nil {
		return feFail("sbatch", "%v", err)
	}
	c, err := feConnect(ctx, g, "sbatch")
	if err != nil {
		return err
	}
	id, err := c.submitSpec(ctx, spec, file)
	if err != nil {
		return feFail("sbatch", "Batch job submission failed: %v", err)
	}
	if parsable {
		fmt.Fprintln(g.Stdout, id)
	} else {
		fmt.Fprintln(g.Stdout, "Submitted batch job", id)
	}
	return nil
}

// submitSpec queues a parsed script in the daemon, as a job a workflow
// engine owns (NoRetry), and returns its front-end id. Its dependencies
// may be front-end ids.
func (c *feClient) submitSpec(ctx context.Context, spec *batchscript.Spec, file string) (string, error) {
	var sites []string
	if spec.Partition != "" || spec.Account != "" {
		// A partition or account is asked for at every site: their names.
		var err error
		if sites, err = c.Sites(ctx); err != nil {
			return "", err
		}
	}
	for _, deps := range []*[]string{&spec.After, &spec.AfterOK, &spec.AfterAny} {
		for i, d := range *deps {
			(*deps)[i] = gridID(c.prefix, d)
		}
	}
	job, _, err := spec.JobFor(file, sites)
	if err != nil {
		return "", err
	}
	req, err := job.Request(c.now, "")
	if err != nil {
		return "", err
	}
	req.NoRetry = true
	req.OutputDir = bridge.IDPlaceholder
	j, err := c.Submit(ctx, req)
	if err != nil {
		return "", err
	}
	if j.State == bridge.Rejected {
		return "", fmt.Errorf("job %s rejected: %s", FrontID(c.prefix, j.ID), j.Reason)
	}
	return FrontID(c.prefix, j.ID), nil
}

// squeue's default format.
const squeueDefault = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"

const squeueLong = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"

func runSqueue(ctx context.Context, g *Env, args []string) error {
	fs := pflag.NewFlagSet("squeue", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	noHeader := fs.BoolP("noheader", "h", false, "")
	format := fs.StringP("format", "o", "", "")
	states := fs.StringP("states", "t", "", "")
	users := fs.StringP("user", "u", "", "")
	jobs := fs.StringP("jobs", "j", "", "")
	names := fs.StringP("name", "n", "", "")
	parts := fs.StringP("partition", "p", "", "")
	accounts := fs.StringP("account", "A", "", "")
	long := fs.BoolP("long", "l", false, "")
	fs.Bool("me", false, "")
	fs.BoolP("all", "a", false, "")
	fs.BoolP("array", "r", false, "")
	if err := fs.Parse(args); err != nil {
		return feFail("squeue", "%v", err)
	}
	if fs.NArg() > 0 {
		return feFail("squeue", "unrecognized argument %q", fs.Arg(0))
	}
	want, all, err := slurmStateSet(*states)
	if err != nil {
		return feFail("squeue", "%v", err)
	}
	c, err := feConnect(ctx, g, "squeue")
	if err != nil {
		return err
	}
	keep := func(r *sqRow) bool {
		if all {
			return true
		}
		if len(want) == 0 {
			return !r.state.Final()
		}
		return want[r.long] || want[r.short]
	}
	me := currentUser()
	sel := func(r *sqRow) bool {
		return keep(r) && inList(*users, me) && inList(*names, r.name) && inList(*parts, r.partition) && inList(*accounts, r.account)
	}
	f := *format
	switch {
	case f == "" && *long:
		f = squeueLong
	case f == "":
		f = squeueDefault
	}
	layout, err := parseFormat(f)
	if err != nil {
		return feFail("squeue", "%v", err)
	}
	b := make([]byte, 0, 1<<20)
	if !*noHeader {
		b = layout.header(b)
	}
	line := func(b []byte, r *sqRow) []byte {
		return layout.row(b, func(b []byte, k byte) []byte { return appendSqueueField(b, c, r, k, me) })
	}
	if *jobs == "" && !all && onlyUnfinished(want) {
		// What squeue shows by default: the daemon's queue, from memory,
		// printed as it is read (10,000 jobs are a few appends each).
		err = c.QueueEach(ctx, func(q *api.QueueRow) error {
			if r := rowOfQueue(q); sel(&r) {
				b = line(b, &r)
			}
			return nil
		})
	} else {
		var js []*bridge.Job
		js, err = c.selectJobs(ctx, *jobs, func(*bridge.Job) bool { return true })
		for _, j := range js {
			if r := rowOfJob(j); sel(&r) {
				b = line(b, &r)
			}
		}
	}
	if err != nil {
		return feFail("squeue", "%v", err)
	}
	_, err = g.Stdout.Write(b)
	return err
}

// onlyUnfinished: the states asked for (none: the default) are only
// those of unfinished jobs.
func onlyUnfinished(want map[string]bool) bool {
	for k := range want {
		if !slices.Contains([]string{"PD", "PENDING", "R", "RUNNING"}, k) {
			return false
		}
	}
	return true
}

// sqRow is what squeue prints of a job, from a whole job (rowOfJob) or
// from a row of the daemon's queue (rowOfQueue): one formatting for both.
type sqRow struct {
	id, parent   string
	index        int
	name         string
	state        bridge.JobState
	long, short  string // slurmState
	nodes, cores int
	estimate     time.Duration
	submit       time.Time
	start, end   time.Time
	sites        string // sitesOf
	partition    string // partition()
	account      string
	reason       string // pendingReason
	command      []string
}

func rowOfJob(j *bridge.Job) sqRow {
	r := sqRow{id: j.ID, parent: j.Parent, index: j.Index, name: j.Req.Name, state: j.State, nodes: j.Req.Nodes, cores: j.Req.CoresPerNode,
		estimate: j.Req.Estimate, submit: j.Submit, start: j.Start, end: j.End, sites: sitesOf(j), partition: partition(j),
		account: account(j), reason: pendingReason(j), command: j.Req.Command}
	r.long, r.short = slurmState(j)
	return r
}

// rowOfQueue is rowOfJob of the job a queue row stands for.
func rowOfQueue(q *api.QueueRow) sqRow {
	j := bridge.Job{ID: q.ID, State: q.State}
	if q.Predicted {
		j.Predicted.Parts = []policy.Part{}
	}
	r := sqRow{id: q.ID, parent: q.Parent, index: q.Index, name: q.Name, state: q.State, nodes: q.Nodes, cores: q.Cores,
		estimate: q.Estimate, submit: q.Submit, start: q.Start, sites: "grid", partition: q.Partition, account: q.Account,
		reason: pendingReason(&j)}
	r.long, r.short = slurmState(&j) // an unfinished job: its state alone says
	if len(q.Sites) == 1 {
		r.sites = q.Sites[0]
	} else if len(q.Sites) > 1 {
		var s []string
		for _, x := range q.Sites {
			if !contains(s, x) {
				s = append(s, x)
			}
		}
		r.sites = strings.Join(s, ",")
	}
	if r.partition == "" {
		r.partition = r.sites
	}
	return r
}

// inList: an empty comma-separated list matches everything.
func inList(list, v string) bool {
	if list == "" {
		return true
	}
	return slices.Contains(strings.Split(list, ","), v)
}

// slurmStateSet reads -t/--states: short or long state names, or "all".
func slurmStateSet(s string) (map[string]bool, bool, error) {
	if s == "" {
		return nil, false, nil
	}
	out := map[string]bool{}
	for _, t := range strings.Split(strings.ToUpper(s), ",") {
		switch t {
		case "ALL":
			return nil, true, nil
		case "PD", "PENDING", "R", "RUNNING", "CD", "COMPLETED", "F", "FAILED", "CA", "CANCELLED", "TO", "TIMEOUT", "NF", "NODE_FAIL":
			out[t] = true
		case "CG", "COMPLETING", "CF", "CONFIGURING", "S", "SUSPENDED", "PR", "PREEMPTED", "BF", "BOOT_FAIL", "DL", "DEADLINE", "OOM", "OUT_OF_MEMORY", "RQ", "REQUEUED", "RS", "RESIZING", "RV", "REVOKED", "SE", "SPECIAL_EXIT", "ST", "STOPPED", "SI", "SIGNALING", "RD", "RESV_DEL_HOLD", "RF", "REQUEUE_FED", "RH", "REQUEUE_HOLD":
			out[t] = true // states a gridsub job never has: nothing matches
		default:
			return nil, false, fmt.Errorf("invalid job state specified: %s", t)
		}
	}
	return out, false, nil
}

// selectJobs lists the jobs ids names (front-end or grid ids, comma
// separated; "" = every job) that keep selects. An array parent is left
// out: its elements are listed.
func (c *feClient) selectJobs(ctx context.Context, ids string, keep func(*bridge.Job) bool) ([]*bridge.Job, error) {
	var js []*bridge.Job
	if ids != "" {
		for _, id := range strings.Split(ids, ",") {
			j, err := c.Job(ctx, gridID(c.prefix, id))
			if errors.Is(err, bridge.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if j.Group != nil {
				els, err := c.listJobs(ctx, bridge.Filter{Parent: j.ID})
				if err != nil {
					return nil, err
				}
				js = append(js, els...)
				continue
			}
			js = append(js, j)
		}
	} else {
		var err error
		if js, err = c.listJobs(ctx, bridge.Filter{}); err != nil {
			return nil, err
		}
	}
	return slices.DeleteFunc(js, func(j *bridge.Job) bool { return j.Group != nil || !keep(j) }), nil
}

// layout is a parsed squeue/sacct format: literal text and fields.
type layout []field

type field struct {
	lit   string // literal text (k == 0)
	k     byte   // field letter
	width int
	right bool
}

// parseFormat reads squeue's -o format: %[.][width]letter (".": right-
// justified; printf's "-" is taken for the default, left), %% and text.
func parseFormat(f string) (layout, error) {
	var out layout
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			j := strings.IndexByte(f[i:], '%')
			if j < 0 {
				j = len(f) - i
			}
			out = append(out, field{lit: f[i : i+j]})
			i += j - 1
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			out = append(out, field{lit: "%"})
			continue
		}
		fd := field{}
		switch {
		case i < len(f) && f[i] == '.':
			fd.right = true
			i++
		case i < len(f) && f[i] == '-': // left, as without '.'
			i++
		}
		for i < len(f) && f[i] >= '0' && f[i] <= '9' {
			fd.width = fd.width*10 + int(f[i]-'0')
			i++
			if fd.width > 1000 {
				return nil, fmt.Errorf("format %q: width too large", f)
			}
		}
		if i >= len(f) {
			return nil, fmt.Errorf("format %q ends inside a field", f)
		}
		if !strings.ContainsRune(squeueFields, rune(f[i])) {
			return nil, fmt.Errorf("format %q: field %%%c is not served by gridsub (it has %s)", f, f[i], squeueFieldList())
		}
		fd.k = f[i]
		out = append(out, fd)
	}
	return out, nil
}

const squeueFields = "ijtTMDPuRrlCNSVeaqoAKFLZ"

func squeueFieldList() string {
	var s []string
	for _, c := range squeueFields {
		s = append(s, "%"+string(c))
	}
	return strings.Join(s, " ")
}

var squeueHeaders = map[byte]string{
	'i': "JOBID", 'j': "NAME", 't': "ST", 'T': "STATE", 'M': "TIME", 'D': "NODES", 'P': "PARTITION", 'u': "USER",
	'R': "NODELIST(REASON)", 'r': "REASON", 'l': "TIME_LIMIT", 'C': "CPUS", 'N': "NODELIST", 'S': "START_TIME",
	'V': "SUBMIT_TIME", 'e': "END_TIME", 'a': "ACCOUNT", 'q': "QOS", 'o': "COMMAND", 'A': "JOBID", 'K': "ARRAY_TASK_ID",
	'F': "ARRAY_JOB_ID", 'L': "TIME_LEFT", 'Z': "WORK_DIR",
}

func (l layout) header(b []byte) []byte {
	return l.row(b, func(b []byte, k byte) []byte { return append(b, squeueHeaders[k]...) })
}

// row appends a line: each field's value (val appends it) cut or padded
// to its width.
func (l layout) row(b []byte, val func(b []byte, k byte) []byte) []byte {
	for _, f := range l {
		if f.k == 0 {
			b = append(b, f.lit...)
			continue
		}
		at := len(b)
		b = val(b, f.k)
		if f.width == 0 {
			continue
		}
		n := len(b) - at
		if n > f.width {
			b, n = b[:at+f.width], f.width // squeue truncates to the width
		}
		pad := f.width - n
		if pad == 0 {
			continue
		}
		b = appendSpaces(b, pad)
		if f.right {
			copy(b[at+pad:], b[at:at+n])
			for i := at; i < at+pad; i++ {
				b[i] = ' '
			}
		}
	}
	return append(b, '\n')
}

const spaces = "                                                                "

func appendSpaces(b []byte, n int) []byte {
	for n > len(spaces) {
		b, n = append(b, spaces...), n-len(spaces)
	}
	return append(b, spaces[:n]...)
}

// appendSqueueField appends field k of a job's line.
func appendSqueueField(b []byte, c *feClient, r *sqRow, k byte, me string) []byte {
	switch k {
	case 'i', 'A':
		return appendFrontID(b, c.prefix, r.id)
	case 'j':
		return append(b, r.name...)
	case 't':
		return append(b, r.short...)
	case 'T':
		return append(b, r.long...)
	case 'M':
		return appendSlurmDuration(b, rowElapsed(r, c.now))
	case 'D':
		return strconv.AppendInt(b, int64(r.nodes), 10)
	case 'P':
		return append(b, r.partition...)
	case 'u':
		return append(b, me...)
	case 'R':
		if r.state == bridge.Running || r.state.Final() {
			return append(b, r.sites...)
		}
		return append(append(append(b, '('), r.reason...), ')')
	case 'r':
		if r.state == bridge.Running || r.state.Final() {
			return append(b, "None"...)
		}
		return append(b, r.reason...)
	case 'l':
		return append(b, slurmLimit(r.estimate)...)
	case 'L':
		if r.state != bridge.Running {
			return append(b, slurmLimit(r.estimate)...)
		}
		return append(b, slurmLimit(max(r.estimate-rowElapsed(r, c.now), 0))...)
	case 'C':
		return strconv.AppendInt(b, int64(r.nodes*max(r.cores, 1)), 10)
	case 'N':
		if r.state == bridge.Running || r.state.Final() {
			return append(b, r.sites...)
		}
		return b
	case 'S':
		if r.start.IsZero() {
			return append(b, "N/A"...)
		}
		return append(b, slurmTime(r.start)...)
	case 'V':
		return append(b, slurmTime(r.submit)...)
	case 'e':
		if r.end.IsZero() {
			return append(b, "N/A"...)
		}
		return append(b, slurmTime(r.end)...)
	case 'a':
		if r.account != "" {
			return append(b, r.account...)
		}
		return append(b, "(null)"...)
	case 'q':
		return append(b, "normal"...)
	case 'o':
		if len(r.command) > 0 {
			return append(b, strings.Join(r.command, " ")...)
		}
		return append(b, "(script)"...)
	case 'K':
		if r.parent != "" {
			return strconv.AppendInt(b, int64(r.index), 10)
		}
		return append(b, "N/A"...)
	case 'F':
		if r.parent != "" {
			return appendFrontID(b, c.prefix, r.parent)
		}
		return appendFrontID(b, c.prefix, r.id)
	case 'Z':
		return append(b, "(gridsub job directory)"...)
	}
	return b
}

// rowElapsed is elapsed() of the row's job.
func rowElapsed(r *sqRow, now time.Time) time.Duration {
	return elapsedOf(r.start, r.end, now)
}

var sacctFields = []string{"JobID", "JobIDRaw", "JobName", "State", "ExitCode", "DerivedExitCode", "Elapsed", "ElapsedRaw", "Start", "End",
	"Submit", "Partition", "Account", "AllocCPUS", "NCPUS", "NNodes", "NodeList", "Timelimit", "User", "Reason", "QOS", "Cluster"}

func runSacct(ctx context.Context, g *Env, args []string) error {
	fs := pflag.NewFlagSet("sacct", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	noHeader := fs.BoolP("noheader", "n", false, "")
	parsable2 := fs.BoolP("parsable2", "P", false, "")
	parsable := fs.BoolP("parsable", "p", false, "")
	delim := fs.String("delimiter", "|", "")
	jobs := fs.StringP("jobs", "j", "", "")
	format := fs.StringP("format", "o", "", "")
	start := fs.StringP("starttime", "S", "", "")
	end := fs.StringP("endtime", "E", "", "")
	states := fs.StringP("state", "s", "", "")
	brief := fs.BoolP("brief", "b", false, "")
	users := fs.StringP("user", "u", "", "")
	fs.BoolP("allocations", "X", false, "")
	fs.BoolP("allusers", "a", false, "")
	fs.BoolP("long", "l", false, "")
	if err := fs.Parse(args); err != nil {
		return feFail("sacct", "%v", err)
	}
	if fs.NArg() > 0 {
		return feFail("sacct", "unrecognized argument %q", fs.Arg(0))
	}
	now := time.Now()
	from, to := time.Time{}, time.Time{}
	var err error
	if *start != "" {
		if from, err = slurmWhen(*start, now); err != nil {
			return feFail("sacct", "-S: %v", err)
		}
	} else if *jobs == "" {
		y, m, d := now.Date()
		from = time.Date(y, m, d, 0, 0, 0, 0, time.Local)
	}
	if *end != "" {
		if to, err = slurmWhen(*end, now); err != nil {
			return feFail("sacct", "-E: %v", err)
		}
	}
	fields := []string{"JobID", "JobName", "Partition", "Account", "AllocCPUS", "State", "ExitCode"}
	if *brief {
		fields = []string{"JobID", "State", "ExitCode"}
	}
	widths := map[string]int{}
	if *format != "" {
		fields = nil
		for _, f := range strings.Split(*format, ",") {
			name, w, hasW := strings.Cut(f, "%")
			k := slices.IndexFunc(sacctFields, func(s string) bool { return strings.EqualFold(s, name) })
			if k < 0 {
				return feFail("sacct", "Invalid field requested: \"%s\" (gridsub serves %s)", name, strings.Join(sacctFields, ","))
			}
			fields = append(fields, sacctFields[k])
			if hasW {
				n, err := strconv.Atoi(w)
				if err != nil || n < 1 || n > 1000 {
					return feFail("sacct", "bad width in %q", f)
				}
				widths[sacctFields[k]] = n
			}
		}
	}
	want, all, err := slurmStateSet(*states)
	if err != nil {
		return feFail("sacct", "%v", err)
	}
	c, err := feConnect(ctx, g, "sacct")
	if err != nil {
		return err
	}
	js, err := c.selectJobs(ctx, *jobs, func(j *bridge.Job) bool {
		long, short := slurmState(j)
		if !all && len(want) > 0 && !want[long] && !want[short] {
			return false
		}
		if !from.IsZero() && j.State.Final() && j.End.Before(from) {
			return false
		}
		return to.IsZero() || !j.Submit.After(to)
	})
	if err != nil {
		return feFail("sacct", "%v", err)
	}
	me := currentUser()
	if !inList(*users, me) {
		js = nil
	}
	sep := ""
	if *parsable || *parsable2 {
		sep = *delim
	}
	var b strings.Builder
	line := func(val func(string) string) {
		for i, f := range fields {
			v := val(f)
			if sep != "" {
				if i > 0 {
					b.WriteString(sep)
				}
				b.WriteString(v)
				continue
			}
			w := widths[f]
			if w == 0 {
				w = 10
			}
			if len(v) > w {
				v = v[:w-1] + "+"
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strings.Repeat(" ", w-len(v)) + v)
		}
		if *parsable && !*parsable2 {
			b.WriteString(sep)
		}
		b.WriteByte('\n')
	}
	if !*noHeader {
		line(func(f string) string { return f })
		if sep == "" {
			line(func(f string) string {
				w := widths[f]
				if w == 0 {
					w = 10
				}
				return strings.Repeat("-", w)
			})
		}
	}
	for _, j := range js {
		line(func(f string) string { return sacctField(c, j, f, me) })
	}
	_, err = io.WriteString(g.Stdout, b.String())
	return err
}

func sacctField(c *feClient, j *bridge.Job, f, me string) string {
	long, _ := slurmState(j)
	switch f {
	case "JobID", "JobIDRaw":
		return FrontID(c.prefix, j.ID)
	case "JobName":
		return j.Req.Name
	case "State":
		if j.State == bridge.Cancelled {
			return "CANCELLED by " + me
		}
		return long
	case "ExitCode":
		return exitCode(j)
	case "DerivedExitCode":
		return exitCode(j)
	case "Elapsed":
		return slurmLimit(elapsed(j, c.now))
	case "ElapsedRaw":
		return strconv.FormatInt(int64(elapsed(j, c.now)/time.Second), 10)
	case "Start":
		return slurmTime(j.Start)
	case "End":
		return slurmTime(j.End)
	case "Submit":
		return slurmTime(j.Submit)
	case "Partition":
		return partition(j)
	case "Account":
		return account(j)
	case "AllocCPUS", "NCPUS":
		return strconv.Itoa(j.Req.Nodes * max(j.Req.CoresPerNode, 1))
	case "NNodes":
		return strconv.Itoa(j.Req.Nodes)
	case "NodeList":
		return sitesOf(j)
	case "Timelimit":
		return slurmLimit(j.Req.Estimate)
	case "User":
		return me
	case "Reason":
		if j.State.Final() || j.State == bridge.Running {
			return "None"
		}
		return pendingReason(j)
	case "QOS":
		return "normal"
	case "Cluster":
		return "gridsub"
	}
	return ""
}

// slurmWhen parses sacct's times: YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS]
// (today), now[{+|-}N[seconds|minutes|hours|days|weeks]], today, midnight.
func slurmWhen(s string, now time.Time) (time.Time, error) {
	l := strings.ToLower(s)
	y, m, d := now.Date()
	switch l {
	case "now":
		return now, nil
	case "today", "midnight":
		return time.Date(y, m, d, 0, 0, 0, 0, time.Local), nil
	}
	if rest, ok := strings.CutPrefix(l, "now"); ok && len(rest) > 1 && (rest[0] == '-' || rest[0] == '+') {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		n, err := strconv.Atoi(rest[1:i])
		if err != nil {
			return time.Time{}, fmt.Errorf("%q: want now-N[units]", s)
		}
		unit := time.Second
		switch u := rest[i:]; {
		case u == "" || strings.HasPrefix(u, "sec"):
		case strings.HasPrefix(u, "min"):
			unit = time.Minute
		case strings.HasPrefix(u, "hour"):
			unit = time.Hour
		case strings.HasPrefix(u, "day"):
			unit = 24 * time.Hour
		case strings.HasPrefix(u, "week"):
			unit = 7 * 24 * time.Hour
		default:
			return time.Time{}, fmt.Errorf("%q: unknown unit %q", s, u)
		}
		if rest[0] == '-' {
			n = -n
		}
		return now.Add(time.Duration(n) * unit), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return time.Date(y, m, d, t.Hour(), t.Minute(), t.Second(), 0, time.Local), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want YYYY-MM-DD[THH:MM[:SS]], HH:MM[:SS], now[-N[units]] or today", s)
}

func runScancel(ctx context.Context, g *Env, args []string) error {
	fs := pflag.NewFlagSet("scancel", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.StringP("name", "n", "", "")
	state := fs.StringP("state", "t", "", "")
	users := fs.StringP("user", "u", "", "")
	parts := fs.StringP("partition", "p", "", "")
	quiet := fs.BoolP("quiet", "Q", false, "")
	signal := fs.StringP("signal", "s", "", "")
	fs.Bool("me", false, "")
	fs.BoolP("verbose", "v", false, "")
	fs.BoolP("full", "f", false, "")
	if err := fs.Parse(args); err != nil {
		return feFail("scancel", "%v", err)
	}
	if *signal != "" && !slices.Contains([]string{"TERM", "SIGTERM", "KILL", "SIGKILL", "9", "15"}, strings.ToUpper(*signal)) {
		return feFail("scancel", "--signal=%s: gridsub cancels jobs; it does not send other signals", *signal)
	}
	ids := fs.Args()
	if len(ids) == 0 && *name == "" && *state == "" && *users == "" && *parts == "" {
		return feFail("scancel", "No job identification provided")
	}
	c, err := feConnect(ctx, g, "scancel")
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		want, all, err := slurmStateSet(*state)
		if err != nil {
			return feFail("scancel", "%v", err)
		}
		me := currentUser()
		js, err := c.selectJobs(ctx, "", func(j *bridge.Job) bool {
			long, short := slurmState(j)
			return !j.State.Final() && (all || len(want) == 0 || want[long] || want[short]) &&
				inList(*name, j.Req.Name) && inList(*users, me) && inList(*parts, partition(j))
		})
		if err != nil {
			return feFail("scancel", "%v", err)
		}
		for _, j := range js {
			ids = append(ids, j.ID)
		}
	}
	bad := 0
	for _, id := range ids {
		for _, one := range strings.Split(id, ",") {
			gid := gridID(c.prefix, one)
			_, err := c.Cancel(ctx, gid)
			switch {
			case err == nil, errors.Is(err, bridge.ErrFinal):
				if err != nil && !*quiet {
					fmt.Fprintf(g.Stderr, "scancel: error: Kill job error on job id %s: Job/step already completing or completed\n", one)
				}
			case errors.Is(err, bridge.ErrNotFound):
				bad++
				if !*quiet {
					fmt.Fprintf(g.Stderr, "scancel: error: Kill job error on job id %s: Invalid job id specified\n", one)
				}
			default:
				return feFail("scancel", "Kill job error on job id %s: %v", one, err)
			}
		}
	}
	if bad > 0 {
		return &Error{Prog: "scancel", Code: 1}
	}
	return nil
}

func runScontrol(ctx context.Context, g *Env, args []string) error {
	words := slices.DeleteFunc(slices.Clone(args), func(s string) bool { return s == "-o" || s == "--oneliner" || s == "-d" || s == "--details" })
	oneLiner := len(words) != len(args) && slices.Contains(args, "-o") || slices.Contains(args, "--oneliner")
	if len(words) < 2 || words[0] != "show" {
		return feFail("scontrol", "gridsub serves `scontrol show job [ID]` and `scontrol show config` (got %q)", strings.Join(args, " "))
	}
	switch words[1] {
	case "config":
		c, err := feConnect(ctx, g, "scontrol")
		if err != nil {
			return err
		}
		fmt.Fprintf(g.Stdout, "Configuration data as of %s\n", slurmTime(c.now))
		for _, kv := range [][2]string{
			{"ClusterName", "gridsub"}, {"SchedulerType", "gridsub"}, {"SchedulerTimeSlice", "5 sec"},
			{"AcctGatherNodeFreq", "0 sec"}, {"MaxArraySize", "10001"}, {"SLURM_VERSION", "gridsub front-end"},
		} {
			fmt.Fprintf(g.Stdout, "%-24s = %s\n", kv[0], kv[1])
		}
		return nil
	case "job", "jobs", "jobid":
	default:
		return feFail("scontrol", "gridsub serves `scontrol show job [ID]` and `scontrol show config` (got %q)", strings.Join(args, " "))
	}
	c, err := feConnect(ctx, g, "scontrol")
	if err != nil {
		return err
	}
	ids := ""
	if len(words) > 2 {
		ids = words[2]
	}
	js, err := c.selectJobs(ctx, ids, func(*bridge.Job) bool { return true })
	if err != nil {
		return feFail("scontrol", "%v", err)
	}
	if len(js) == 0 {
		if ids != "" {
			return feFail("scontrol", "Invalid job id specified")
		}
		fmt.Fprintln(g.Stdout, "No jobs in the system")
		return nil
	}
	me := currentUser()
	var b strings.Builder
	for i, j := range js {
		if i > 0 && !oneLiner {
			b.WriteByte('\n')
		}
		long, _ := slurmState(j)
		reason := "None"
		if !j.State.Final() && j.State != bridge.Running {
			reason = pendingReason(j)
		}
		lines := []string{
			fmt.Sprintf("JobId=%s JobName=%s", FrontID(c.prefix, j.ID), j.Req.Name),
			fmt.Sprintf("UserId=%s GroupId=%s", me, me),
			fmt.Sprintf("JobState=%s Reason=%s Dependency=(null)", long, reason),
			fmt.Sprintf("Requeue=0 Restarts=%d BatchFlag=1 ExitCode=%s", max(j.Attempts-1, 0), exitCode(j)),
			fmt.Sprintf("RunTime=%s TimeLimit=%s", slurmLimit(elapsed(j, c.now)), slurmLimit(j.Req.Estimate)),
			fmt.Sprintf("SubmitTime=%s StartTime=%s EndTime=%s", slurmTime(j.Submit), slurmTime(j.Start), slurmTime(j.End)),
			fmt.Sprintf("Partition=%s Account=%s NodeList=%s", partition(j), orNull(account(j)), sitesOf(j)),
			fmt.Sprintf("NumNodes=%d NumCPUs=%d NumTasks=%d", j.Req.Nodes, j.Req.Nodes*max(j.Req.CoresPerNode, 1), j.Req.Nodes),
			fmt.Sprintf("GridId=%s", j.ID),
		}
		if oneLiner {
			b.WriteString(strings.Join(lines, " ") + "\n")
			continue
		}
		b.WriteString(lines[0] + "\n")
		for _, l := range lines[1:] {
			b.WriteString("   " + l + "\n")
		}
	}
	_, err = io.WriteString(g.Stdout, b.String())
	return err
}

func orNull(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}
