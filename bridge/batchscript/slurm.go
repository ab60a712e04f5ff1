package batchscript

import (
	"fmt"
	"strconv"
	"strings"
)

// opt is one option of sbatch or qsub: its names, whether it takes a
// value, and what it does.
type opt struct {
	long  string // without "--"; "" = none
	short byte   // 0 = none
	arg   bool
	do    func(p *parser, ln int, dir, val string)
}

// unsupported refuses an option with why.
func unsupported(why string) func(p *parser, ln int, dir, val string) {
	return func(p *parser, ln int, dir, _ string) { p.fail(ln, dir, ErrUnsupported, "%s", why) }
}

// harmless accepts an option that changes nothing a gridsub job can
// observe, with a warning saying why.
func harmless(why string) func(p *parser, ln int, dir, val string) {
	return func(p *parser, ln int, dir, _ string) { p.warn(ln, dir, why) }
}

var slurmOpts []opt

func init() {
	slurmOpts = []opt{
		{"job-name", 'J', true, func(p *parser, ln int, dir, v string) { p.name(ln, dir, v) }},
		{"nodes", 'N', true, func(p *parser, ln int, dir, v string) {
			lo, hi, ok := strings.Cut(v, "-")
			if ok && lo != hi {
				p.fail(ln, dir, ErrUnsupported, "a node range (%s) lets SLURM pick the count; gridsub needs one count: give --nodes=%s", v, lo)
				return
			}
			if n, ok := p.count(ln, dir, lo, 1, 100000); ok {
				p.s.Nodes, p.nodesSet = n, true
			}
		}},
		{"ntasks", 'n', true, func(p *parser, ln int, dir, v string) {
			if n, ok := p.count(ln, dir, v, 1, 10000000); ok {
				p.s.NTasks, p.ntasksSet = n, true
			}
		}},
		{"ntasks-per-node", 0, true, func(p *parser, ln int, dir, v string) {
			if n, ok := p.count(ln, dir, v, 1, 100000); ok {
				p.s.TasksPerNode = n
			}
		}},
		{"cpus-per-task", 'c', true, func(p *parser, ln int, dir, v string) {
			if n, ok := p.count(ln, dir, v, 1, 100000); ok {
				p.s.CPUsPerTask = n
			}
		}},
		{"time", 't', true, func(p *parser, ln int, dir, v string) {
			d, err := SlurmTime(v)
			if err != nil {
				p.fail(ln, dir, ErrValue, "%v", err)
				return
			}
			p.s.Walltime, p.s.WalltimeSet = d, true
		}},
		{"mem", 0, true, func(p *parser, ln int, dir, v string) {
			n, err := SlurmSize(v)
			switch {
			case err != nil:
				p.fail(ln, dir, ErrValue, "%v", err)
			case n == 0:
				p.fail(ln, dir, ErrUnsupported, "--mem=0 asks for all of a node's memory, which differs by site; give a size (--mem=4G)")
			default:
				p.s.MemPerNode, p.memPerCPU = n, 0
			}
		}},
		{"mem-per-cpu", 0, true, func(p *parser, ln int, dir, v string) {
			n, err := SlurmSize(v)
			if err != nil || n == 0 {
				if err == nil {
					err = fmt.Errorf("%q: give a size above zero", v)
				}
				p.fail(ln, dir, ErrValue, "%v", err)
				return
			}
			p.memPerCPU, p.s.MemPerNode = n, 0
		}},
		{"gres", 0, true, func(p *parser, ln int, dir, v string) {
			for _, g := range strings.Split(v, ",") {
				parts := strings.Split(g, ":")
				if parts[0] != "gpu" {
					p.fail(ln, dir, ErrUnsupported, "generic resource %q: gridsub knows only gpu", parts[0])
					continue
				}
				n := 1
				if len(parts) > 1 {
					var ok bool
					if n, ok = p.count(ln, dir, parts[len(parts)-1], 1, 64); !ok {
						continue
					}
				}
				if len(parts) > 2 {
					p.fail(ln, dir, ErrUnsupported, "a GPU type (%s) is a site's own name; gridsub asks for GPUs by count: --gres=gpu:%d", parts[1], n)
					continue
				}
				p.s.GPUsPerNode, p.gpuLine = n, ln
			}
		}},
		{"gpus-per-node", 0, true, func(p *parser, ln int, dir, v string) {
			if n, ok := p.gpuCount(ln, dir, v); ok {
				p.s.GPUsPerNode, p.gpuLine = n, ln
			}
		}},
		{"gpus", 'G', true, func(p *parser, ln int, dir, v string) {
			if n, ok := p.gpuCount(ln, dir, v); ok {
				p.gpusTotal, p.gpuLine = n, ln
			}
		}},
		{"gpus-per-task", 0, true, func(p *parser, ln int, dir, v string) {
			if n, ok := p.gpuCount(ln, dir, v); ok {
				p.gpusPerTask, p.gpuLine = n, ln
			}
		}},
		{"partition", 'p', true, func(p *parser, ln int, dir, v string) {
			if strings.Contains(v, ",") {
				p.fail(ln, dir, ErrUnsupported, "a list of partitions lets SLURM pick one; gridsub picks the site: give one partition")
				return
			}
			p.s.Partition = p.word(ln, dir, v)
		}},
		{"account", 'A', true, func(p *parser, ln int, dir, v string) { p.s.Account = p.word(ln, dir, v) }},
		{"output", 'o', true, func(p *parser, ln int, dir, v string) { p.s.Stdout = p.path(ln, dir, v) }},
		{"error", 'e', true, func(p *parser, ln int, dir, v string) { p.s.Stderr = p.path(ln, dir, v) }},
		{"input", 'i', true, func(p *parser, ln int, dir, v string) {
			if v != "/dev/null" {
				p.fail(ln, dir, ErrUnsupported, "a job's standard input is /dev/null at every site; read the file in the script instead")
			}
		}},
		{"array", 'a', true, func(p *parser, ln int, dir, v string) { p.s.Array = p.array(ln, dir, v) }},
		{"dependency", 'd', true, func(p *parser, ln int, dir, v string) { p.slurmDeps(ln, dir, v) }},
		{"mail-type", 0, true, func(p *parser, ln int, dir, v string) { p.mailTypes(ln, dir, v) }},
		{"mail-user", 0, true, func(p *parser, ln int, dir, v string) { p.mailUser(ln, dir, v) }},
		{"export", 0, true, func(p *parser, ln int, dir, v string) { p.export, p.exportLine = v, ln }},
		{"chdir", 'D', true, func(p *parser, ln int, dir, v string) { p.s.Chdir = p.path(ln, dir, v) }},
		{"workdir", 0, true, func(p *parser, ln int, dir, v string) { p.s.Chdir = p.path(ln, dir, v) }},
		{"parsable", 0, false, func(*parser, int, string, string) {}},
		{"quiet", 'Q', false, func(*parser, int, string, string) {}},
		// Accepted, with no effect a gridsub job can observe.
		{"exclusive", 0, false, harmless("gridsub places whole-node shares by --nodes, --ntasks-per-node and --cpus-per-task; the site decides whether nodes are shared")},
		{"comment", 0, true, harmless("a comment: kept by nobody")},
		{"requeue", 0, false, harmless("gridsub requeues a job a site loses by itself; the job's own failure is final")},
		{"no-requeue", 0, false, harmless("gridsub does not requeue a job after its own failure")},
		{"open-mode", 0, true, harmless("output files are written fresh by each run")},
		{"hint", 0, true, harmless("a placement hint for the site's task launcher: not passed on")},
		{"distribution", 'm', true, harmless("task distribution is srun's inside the job")},
		{"cpu-bind", 0, true, harmless("binding is srun's inside the job")},
		{"mem-bind", 0, true, harmless("binding is srun's inside the job")},
		{"nice", 0, true, harmless("gridsub's queue order is its policy's; a nice value is not passed on")},
		{"priority", 0, true, harmless("gridsub's queue order is its policy's; a priority is not passed on")},
		{"propagate", 0, true, harmless("resource limits are the site's")},
		{"get-user-env", 0, false, harmless("the job starts from the site's login environment")},
		{"kill-on-invalid-dep", 0, true, harmless("gridsub always cancels a job whose dependency can no longer be met")},
		{"no-kill", 'k', false, harmless("a node failure ends the component; gridsub then requeues the job")},
		{"verbose", 'v', false, harmless("sbatch's verbosity")},
		{"wckey", 0, true, harmless("accounting keys are the site's")},
		{"time-min", 0, true, harmless("gridsub schedules by --time")},
		{"threads-per-core", 0, true, harmless("threads per core are the node's")},
		{"ntasks-per-core", 0, true, harmless("task layout is srun's inside the job")},
		{"ntasks-per-socket", 0, true, harmless("task layout is srun's inside the job")},
		{"sockets-per-node", 0, true, harmless("gridsub sizes a node by its cores")},
		{"cores-per-socket", 0, true, harmless("gridsub sizes a node by its cores")},
		{"switches", 0, true, harmless("network topology is the site's")},
		{"overcommit", 'O', false, harmless("task layout is srun's inside the job")},
		{"spread-job", 0, false, harmless("task layout is srun's inside the job")},
		{"oversubscribe", 's', false, harmless("the site decides whether nodes are shared")},
		// Refused: each changes what the job gets in a way gridsub cannot
		// carry to every site.
		{"qos", 'q', true, unsupported("a QoS is a site's own name; gridsub's tiers are scheduling.qos in a job file")},
		{"constraint", 'C', true, unsupported("node features are a site's own names; choose sites with a job file's scheduling.sites")},
		{"nodelist", 'w', true, unsupported("node names are a site's own; gridsub picks the site")},
		{"exclude", 'x', true, unsupported("node names are a site's own; gridsub picks the site")},
		{"reservation", 0, true, unsupported("a site reservation's name is the site's own; ask for a window with a job file's scheduling.reservation")},
		{"begin", 'b', true, unsupported("gridsub does not delay a start; use a job file's scheduling.reservation")},
		{"deadline", 0, true, unsupported("give a deadline as a job file's scheduling.deadline")},
		{"hold", 'H', false, unsupported("submitting held is not supported")},
		{"licenses", 'L', true, unsupported("licenses are a site's own")},
		{"tmp", 0, true, unsupported("local disk per node is not a request gridsub can place by")},
		{"cpus-per-gpu", 0, true, unsupported("give --cpus-per-task and --gpus-per-node")},
		{"mem-per-gpu", 0, true, unsupported("give --mem (per node)")},
		{"gpus-per-socket", 0, true, unsupported("give --gpus-per-node")},
		{"signal", 0, true, unsupported("a warning signal before the time limit is not sent at every site")},
		{"uid", 0, true, unsupported("jobs run as the site account gridsub logs in as")},
		{"gid", 0, true, unsupported("jobs run as the site account gridsub logs in as")},
		{"wait", 'W', false, unsupported("use `gridsub wait ID` (or sbatch without --wait and poll)")},
		{"test-only", 0, false, unsupported("use `gridsub submit --dry-run`")},
		{"clusters", 'M', true, unsupported("gridsub picks the site; restrict sites with a job file's scheduling.sites")},
		{"container", 0, true, unsupported("OCI containers are a site's own")},
		{"wrap", 0, true, unsupported("--wrap is an sbatch command-line option, not a directive")},
		{"burst-buffer", 0, true, unsupported("burst buffers are a site's own")},
		{"het-job", 0, true, unsupported("heterogeneous jobs are not supported")},
	}
}

// slurmOptions reads sbatch options.
func (p *parser) slurmOptions(ln int, words []string) {
	for i := 0; i < len(words); i++ {
		w := words[i]
		var o *opt
		var val string
		hasVal := false
		dir := w
		switch {
		case strings.HasPrefix(w, "--"):
			name, v, eq := strings.Cut(w[2:], "=")
			o = findLong(slurmOpts, name)
			if o == nil {
				p.fail(ln, w, ErrUnsupported, "unknown sbatch option%s", suggestLong(slurmOpts, name))
				continue
			}
			val, hasVal = v, eq
		case len(w) >= 2 && w[0] == '-':
			o = findShort(slurmOpts, w[1])
			if o == nil {
				p.fail(ln, w, ErrUnsupported, "unknown sbatch option")
				continue
			}
			if len(w) > 2 {
				val, hasVal = strings.TrimPrefix(w[2:], "="), true
			}
		default:
			p.fail(ln, w, ErrValue, "not an option (a directive's words are options like --time=1:00:00)")
			continue
		}
		if o.arg && !hasVal {
			if i+1 >= len(words) {
				p.fail(ln, w, ErrValue, "needs a value")
				continue
			}
			i++
			val = words[i]
			dir = w + " " + val
		}
		if !o.arg && hasVal {
			p.fail(ln, w, ErrValue, "takes no value")
			continue
		}
		o.do(p, ln, dir, val)
	}
}

func findLong(opts []opt, name string) *opt {
	for i := range opts {
		if opts[i].long == name {
			return &opts[i]
		}
	}
	// sbatch accepts unambiguous prefixes (getopt_long).
	var hit *opt
	for i := range opts {
		if len(name) >= 3 && strings.HasPrefix(opts[i].long, name) {
			if hit != nil {
				return nil
			}
			hit = &opts[i]
		}
	}
	return hit
}

func findShort(opts []opt, c byte) *opt {
	for i := range opts {
		if opts[i].short == c {
			return &opts[i]
		}
	}
	return nil
}

func suggestLong(opts []opt, name string) string {
	best, bestD := "", 3
	for _, o := range opts {
		if o.long == "" {
			continue
		}
		if d := distance(name, o.long); d < bestD {
			best, bestD = o.long, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean --" + best + "?"
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev = cur
	}
	return prev[len(b)]
}

// count reads a whole number in [lo, hi].
func (p *parser) count(ln int, dir, v string, lo, hi int) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		p.fail(ln, dir, ErrValue, "%q: want a whole number from %d to %d", v, lo, hi)
		return 0, false
	}
	return n, true
}

// gpuCount reads "N" or "TYPE:N".
func (p *parser) gpuCount(ln int, dir, v string) (int, bool) {
	if t, n, ok := strings.Cut(v, ":"); ok {
		p.fail(ln, dir, ErrUnsupported, "a GPU type (%s) is a site's own name; gridsub asks for GPUs by count: give %s", t, n)
		return 0, false
	}
	return p.count(ln, dir, v, 1, 64)
}

// word checks a partition, queue or account name.
func (p *parser) word(ln int, dir, v string) string {
	if v == "" || len(v) > 64 || strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		p.fail(ln, dir, ErrValue, "%q: want 1-64 letters, digits, '.', '_' or '-'", v)
		return ""
	}
	return v
}

// path checks an output, error or directory path.
func (p *parser) path(ln int, dir, v string) string {
	switch {
	case v == "":
		p.fail(ln, dir, ErrValue, "is empty; give a path")
	case len(v) > 4096:
		p.fail(ln, dir, ErrValue, "is longer than 4096 bytes")
	case strings.ContainsAny(v, "\n\r"):
		p.fail(ln, dir, ErrValue, "a path cannot hold a line break")
	default:
		return v
	}
	return ""
}

// name checks a job name. A name gridsub cannot use as is (spaces,
// slashes, longer than 64) is changed into one it can, with a warning;
// the job still sees the name asked for in SLURM_JOB_NAME and PBS_JOBNAME.
func (p *parser) name(ln int, dir, v string) {
	if v == "" {
		p.fail(ln, dir, ErrValue, "is empty; give a name")
		return
	}
	if strings.ContainsAny(v, "\n\r\x00") {
		p.fail(ln, dir, ErrValue, "a name cannot hold a line break")
		return
	}
	n := SafeName(v)
	p.s.Name, p.s.OrigName = n, ""
	if n != v {
		p.s.OrigName = v
		p.warn(ln, dir, fmt.Sprintf("gridsub names the job %q (letters, digits, '.', '_', '-', at most 64); the job sees %q in SLURM_JOB_NAME and PBS_JOBNAME", n, v))
	}
}

// SafeName turns s into a valid gridsub job name: every character but
// letters, digits, '.', '_' and '-' becomes '_', the first must be a letter
// or digit, at most 64 characters.
func SafeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	out := string(b)
	if out == "" || !(out[0] >= 'a' && out[0] <= 'z' || out[0] >= 'A' && out[0] <= 'Z' || out[0] >= '0' && out[0] <= '9') {
		out = "j" + out
	}
	if len(out) > 64 {
		out = out[:64]
	}
	return out
}

// array checks an array spec: SLURM's "1-10%2", "0,4,8-12:2".
func (p *parser) array(ln int, dir, v string) string {
	if _, err := parseArray(v); err != nil {
		p.fail(ln, dir, ErrValue, "%v", err)
		return ""
	}
	return v
}

// slurmDeps reads --dependency: TYPE:ID[:ID...] joined by ','.
func (p *parser) slurmDeps(ln int, dir, v string) {
	if strings.Contains(v, "?") {
		p.fail(ln, dir, ErrUnsupported, "'?' (any of the conditions) is not supported; gridsub waits for all of them (join with ',')")
		return
	}
	for _, d := range strings.Split(v, ",") {
		p.dep(ln, dir, d)
	}
}

// dep reads one TYPE:ID[:ID...] (SLURM and PBS share the syntax).
func (p *parser) dep(ln int, dir, d string) {
	parts := strings.Split(d, ":")
	kind, ids := parts[0], parts[1:]
	if kind == "singleton" {
		p.fail(ln, dir, ErrUnsupported, "singleton is not supported; chain the jobs with afterany:ID")
		return
	}
	if len(ids) == 0 {
		p.fail(ln, dir, ErrValue, "%q: want TYPE:ID[:ID...], like afterok:1234", d)
		return
	}
	for _, id := range ids {
		if !validID(id) {
			p.fail(ln, dir, ErrValue, "%q is not a job id (a number like 1234, or a grid id)", id)
			return
		}
	}
	switch kind {
	case "after":
		p.s.After = append(p.s.After, ids...)
	case "afterok":
		p.s.AfterOK = append(p.s.AfterOK, ids...)
	case "afterany":
		p.s.AfterAny = append(p.s.AfterAny, ids...)
	case "afternotok":
		p.fail(ln, dir, ErrUnsupported, "afternotok (run only if a job fails) is not supported; gridsub has after, afterok and afterany")
	case "aftercorr", "aftersomeok", "afterburstbuffer", "expand", "before", "beforeok", "beforenotok", "beforeany", "on", "synccount":
		p.fail(ln, dir, ErrUnsupported, "%s is not supported; gridsub has after, afterok and afterany", kind)
	default:
		p.fail(ln, dir, ErrValue, "unknown dependency type %q; want after, afterok or afterany", kind)
	}
}

// validID: a front-end's integer id, with an optional array suffix "_N"
// refused, or a grid id.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

func (p *parser) mailTypes(ln int, dir, v string) {
	p.s.MailTypes = nil
	for _, t := range strings.Split(strings.ToUpper(v), ",") {
		switch t {
		case "NONE":
			p.s.MailTypes = nil
			return
		case "BEGIN", "END", "FAIL":
			p.s.MailTypes = appendOnce(p.s.MailTypes, t)
		case "ALL":
			p.s.MailTypes = []string{"BEGIN", "END", "FAIL"}
		case "REQUEUE", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS":
			p.fail(ln, dir, ErrUnsupported, "mail type %s is not supported; gridsub mails on BEGIN, END and FAIL (ALL = the three)", t)
		default:
			p.fail(ln, dir, ErrValue, "unknown mail type %q; want BEGIN, END, FAIL, ALL or NONE", t)
		}
	}
}

func (p *parser) mailUser(ln int, dir, v string) {
	for _, u := range strings.Split(v, ",") {
		if u == "" || strings.Trim(u, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-@") != "" {
			p.fail(ln, dir, ErrValue, "%q is not a mail address", u)
			return
		}
	}
	p.s.MailUser = v
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
