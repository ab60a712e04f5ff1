package batchscript

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/bridge/jobfile"
)

// Job is the gridsub job that runs s: its script sets the batch systems'
// variables, enters --chdir, sends its streams where -o and -e say, mails
// as --mail-type says, and runs the script body as written (by its #! line,
// or qsub -S's shell). Partition and account are the caller's to put in
// SiteOptions (they name sites). Outputs are the directories of relative
// -o and -e paths, fetched back when the job ends.
func (s *Spec) Job() *jobfile.Job {
	j := &jobfile.Job{
		Name:   s.Name,
		Script: s.Script(),
		Env:    map[string]string{},
		Resources: jobfile.Resources{
			Nodes: s.Nodes, CoresPerNode: s.CoresPerNode, MemPerNode: s.MemPerNode,
			GPUsPerNode: s.GPUsPerNode, Walltime: s.Walltime,
		},
		Array:      s.Array,
		After:      s.After,
		AfterOK:    s.AfterOK,
		AfterAny:   s.AfterAny,
		Scheduling: jobfile.Scheduling{QoS: jobfile.QoSAuto},
	}
	for k, v := range s.Env {
		j.Env[k] = v
	}
	for _, p := range []string{s.Stdout, s.Stderr} {
		if d := fetchDir(p, s.Chdir); d != "" && !contains(j.Outputs, d) {
			j.Outputs = append(j.Outputs, d)
		}
	}
	return j
}

// fetchDir is the directory of a relative output path pattern to fetch
// back: its first component when that holds no pattern ("logs/%j.out" →
// "logs/"); "" for an absolute path, one in the job directory itself, or
// one below an absolute --chdir.
func fetchDir(p, chdir string) string {
	if p == "" || path.IsAbs(p) || path.IsAbs(chdir) {
		return ""
	}
	full := path.Clean(path.Join(chdir, p))
	first, _, ok := strings.Cut(full, "/")
	if !ok || first == ".." || first == "." || strings.ContainsAny(first, "%^") {
		return ""
	}
	return first + "/"
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Script renders the bash script that runs the body as the batch system
// would.
func (s *Spec) Script() string {
	var b strings.Builder
	q := shellQuote
	fmt.Fprintf(&b, "#!/bin/bash\n# gridsub: the %s script %s, translated (bridge/batchscript)\n", s.Dialect, q(s.Name))
	b.WriteString("gridsub_top=${GRIDSUB_JOB_DIR:-$PWD}\n")
	// The front-ends' id: the sequence number of the grid id, with an
	// array element's "_INDEX" (g0lx8k-000042_3 is 42_3).
	b.WriteString("gridsub_id=${GRIDSUB_JOB_ID:-0}; gridsub_el=\n")
	b.WriteString("case $gridsub_id in *_*) gridsub_el=_${gridsub_id##*_}; gridsub_id=${gridsub_id%_*} ;; esac\n")
	b.WriteString("gridsub_n=${gridsub_id##*[!0-9]}; export GRIDSUB_JOB_NUM=$((10#${gridsub_n:-0}))$gridsub_el\n")
	b.WriteString("if [ -n \"${GRIDSUB_ARRAY_JOB_ID:-}\" ]; then gridsub_n=${GRIDSUB_ARRAY_JOB_ID##*[!0-9]}; export GRIDSUB_ARRAY_JOB_NUM=$((10#${gridsub_n:-0})); fi\n")
	name := s.Name
	if s.OrigName != "" {
		name = s.OrigName
	}
	// The site's own batch system sets its variables (srun and mpirun read
	// them); gridsub sets the others'.
	fmt.Fprintf(&b, "if [ -z \"${SLURM_JOB_ID:-}\" ]; then\n  export SLURM_JOB_ID=$GRIDSUB_JOB_NUM SLURM_JOBID=$GRIDSUB_JOB_NUM SLURM_JOB_NAME=%s SLURM_NTASKS=%d SLURM_NPROCS=%d SLURM_JOB_NUM_NODES=%d SLURM_NNODES=%d SLURM_CPUS_PER_TASK=%d SLURM_NTASKS_PER_NODE=%d SLURM_SUBMIT_DIR=\"$gridsub_top\" SLURM_SUBMIT_HOST=$(hostname)\nfi\n",
		q(name), s.NTasks, s.NTasks, s.Nodes, s.Nodes, s.CPUsPerTask, s.TasksPerNode)
	fmt.Fprintf(&b, "if [ -z \"${PBS_JOBID:-}\" ]; then\n  export PBS_JOBID=$GRIDSUB_JOB_NUM PBS_JOBNAME=%s PBS_NP=%d PBS_NUM_NODES=%d PBS_NUM_PPN=%d PBS_O_WORKDIR=\"$gridsub_top\" PBS_O_HOST=$(hostname) PBS_ENVIRONMENT=PBS_BATCH\nfi\n",
		q(name), s.NTasks, s.Nodes, s.TasksPerNode)
	if s.Partition != "" {
		fmt.Fprintf(&b, "export SLURM_JOB_PARTITION=${SLURM_JOB_PARTITION:-%s} PBS_QUEUE=${PBS_QUEUE:-%s}\n", q(s.Partition), q(s.Partition))
	}
	b.WriteString("if [ -n \"${GRIDSUB_ARRAY_INDEX:-}\" ]; then\n  export SLURM_ARRAY_TASK_ID=$GRIDSUB_ARRAY_INDEX SLURM_ARRAY_JOB_ID=$GRIDSUB_ARRAY_JOB_NUM PBS_ARRAY_INDEX=$GRIDSUB_ARRAY_INDEX PBS_ARRAYID=$GRIDSUB_ARRAY_INDEX PBS_ARRAY_ID=$GRIDSUB_ARRAY_JOB_NUM\nfi\n")
	// The body, as written, beside the job.
	d := heredocDelim(s.Body)
	body := s.Body
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	fmt.Fprintf(&b, "gridsub_body=\"$gridsub_top/.gridsub-batch-script\"\ncat > \"$gridsub_body\" <<'%s'\n%s%s\nchmod 700 \"$gridsub_body\" || exit 1\n", d, body, d)
	if s.Chdir != "" {
		fmt.Fprintf(&b, "cd -- %s || { echo %s >&2; exit 1; }\n", q(s.Chdir), q("gridsub: cannot enter the job's directory "+s.Chdir))
	}
	if s.Stdout != "" {
		fmt.Fprintf(&b, "gridsub_out=%s\nmkdir -p -- \"$(dirname -- \"$gridsub_out\")\" && exec >\"$gridsub_out\" || exit 1\n", s.pattern(s.Stdout))
		if s.Stderr == "" {
			b.WriteString("exec 2>&1\n")
		}
	}
	if s.Stderr != "" {
		fmt.Fprintf(&b, "gridsub_err=%s\nmkdir -p -- \"$(dirname -- \"$gridsub_err\")\" && exec 2>\"$gridsub_err\" || exit 1\n", s.pattern(s.Stderr))
	}
	if len(s.MailTypes) > 0 {
		to := "${USER:-$(id -un)}"
		if s.MailUser != "" {
			to = q(s.MailUser)
		}
		// The site's own mail command, as the batch systems use it.
		fmt.Fprintf(&b, "gridsub_mail() { if command -v mail >/dev/null 2>&1; then printf '%%s\\n' \"$2\" | mail -s \"$1\" %s; else echo \"gridsub: no mail command at this site: mail '$1' not sent\" >&2; fi; }\n", to)
	}
	subject := func(what string) string {
		return fmt.Sprintf("\"gridsub job $GRIDSUB_JOB_NUM (%s) %s\"", dq(name), what)
	}
	if contains(s.MailTypes, "BEGIN") {
		fmt.Fprintf(&b, "gridsub_mail %s \"began on $(hostname)\"\n", subject("began"))
	}
	args := ""
	for _, a := range s.Args {
		args += " " + q(a)
	}
	switch {
	case s.Interpreter != "":
		fmt.Fprintf(&b, "%s \"$gridsub_body\"%s\n", q(s.Interpreter), args)
	case strings.HasPrefix(s.Body, "#!"):
		fmt.Fprintf(&b, "\"$gridsub_body\"%s\n", args)
	default: // qsub runs a script without #! with the user's shell
		fmt.Fprintf(&b, "bash \"$gridsub_body\"%s\n", args)
	}
	b.WriteString("gridsub_rc=$?\n")
	if contains(s.MailTypes, "END") || contains(s.MailTypes, "FAIL") {
		cond := "true"
		if !contains(s.MailTypes, "END") {
			cond = "[ \"$gridsub_rc\" -ne 0 ]"
		}
		fmt.Fprintf(&b, "if %s; then gridsub_mail %s \"exit code $gridsub_rc\"; fi\n", cond, subject("ended with exit code $gridsub_rc"))
	}
	b.WriteString("exit \"$gridsub_rc\"\n")
	return b.String()
}

// pattern renders an output path pattern as a double-quoted shell word:
// SLURM's %j %x %A %a %u %N %n %t %s %% (with an optional width, %4a) and
// PBS Pro's ^array_index^.
func (s *Spec) pattern(p string) string {
	name := s.Name
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		if s.Dialect == PBS && strings.HasPrefix(p[i:], "^array_index^") {
			b.WriteString("${GRIDSUB_ARRAY_INDEX:-}")
			i += len("^array_index^") - 1
			continue
		}
		if c != '%' || i+1 >= len(p) {
			b.WriteString(dq(string(c)))
			continue
		}
		j := i + 1
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if j >= len(p) {
			b.WriteString(dq(p[i:]))
			break
		}
		width, _ := strconv.Atoi(p[i+1 : j])
		num := func(v string) string {
			if width > 0 {
				return fmt.Sprintf("$(printf '%%0%dd' \"%s\")", min(width, 10), v)
			}
			return v
		}
		switch p[j] {
		case 'j':
			b.WriteString(num("$GRIDSUB_JOB_NUM"))
		case 'A':
			b.WriteString(num("${GRIDSUB_ARRAY_JOB_NUM:-$GRIDSUB_JOB_NUM}"))
		case 'a':
			b.WriteString(num("${GRIDSUB_ARRAY_INDEX:-4294967294}"))
		case 'x':
			b.WriteString(dq(name))
		case 'u':
			b.WriteString("${USER:-$(id -un)}")
		case 'N':
			b.WriteString("$(hostname -s)")
		case 'n', 't':
			b.WriteString(num("0"))
		case 's':
			b.WriteString("batch")
		case '%':
			b.WriteString("%")
		default: // as SLURM: an unknown escape stays as written
			b.WriteString(dq(p[i : j+1]))
		}
		i = j
	}
	b.WriteByte('"')
	return b.String()
}

// dq escapes s for the inside of a double-quoted shell word.
func dq(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
	return r.Replace(s)
}

// shellQuote quotes s as one shell word.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// heredocDelim picks a here-document delimiter that is no line of body.
func heredocDelim(body string) string {
	lines := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		lines[l] = true
	}
	d := "GRIDSUB_BATCH_SCRIPT_END"
	for i := 1; lines[d]; i++ {
		d = fmt.Sprintf("GRIDSUB_BATCH_SCRIPT_END_%d", i)
	}
	return d
}
