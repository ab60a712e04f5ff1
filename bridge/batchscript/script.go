package batchscript

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Errors of Parse. Every *Error wraps one of them.
var (
	// ErrUnsupported: a directive or option gridsub cannot honour at its
	// sites (a node list, a QoS, a begin time...). Remove it, or use a
	// gridsub job file.
	ErrUnsupported = errors.New("directive gridsub cannot honour")
	// ErrValue: a directive's value is malformed (a bad time, size, count).
	ErrValue = errors.New("bad directive value")
	// ErrScript: the script itself is unusable (empty, NUL bytes, too big).
	ErrScript = errors.New("bad batch script")
)

// Dialect names the directive language of a script.
type Dialect string

// Directive languages.
const (
	SLURM Dialect = "slurm" // #SBATCH, sbatch options
	PBS   Dialect = "pbs"   // #PBS, qsub options (PBS Pro and Torque)
)

// MaxScript bounds a script: the same limit as a job file's script.
const MaxScript = 1 << 20

// Error is a directive gridsub refuses, with where it was.
type Error struct {
	File      string // script name ("" for command-line options)
	Line      int    // 1-based line of the directive; 0 for a command-line option; -1 for the whole script
	Directive string // the option as written ("--qos=high", "-l nodes=n01")
	Msg       string
	Err       error // ErrUnsupported, ErrValue or ErrScript
}

func (e *Error) Error() string {
	where := "command line"
	switch {
	case e.Line > 0:
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	case e.Line < 0 || e.File != "" && e.Directive == "":
		where = e.File
	}
	if e.Directive == "" {
		return where + ": " + e.Msg
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Directive, e.Msg)
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Errors is every refusal of one Parse, in line order.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes each error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Warning is a directive accepted without effect, or changed, with why.
type Warning struct {
	Line      int    `json:"line,omitempty"` // 0: a command-line option; -1: the whole script
	Directive string `json:"directive"`
	Msg       string `json:"msg"`
}

func (w Warning) String(file string) string {
	where := "command line"
	switch {
	case w.Line > 0:
		where = fmt.Sprintf("%s:%d", file, w.Line)
	case w.Line < 0:
		where = file
	}
	return fmt.Sprintf("%s: %s: %s", where, w.Directive, w.Msg)
}

// Options are what Parse needs besides the script.
type Options struct {
	// Args are options given on the command line (sbatch's or qsub's, in
	// Dialect's language); they override the script's directives.
	Args []string
	// Dialect of Args; "" = the script's (SLURM when it has none).
	Dialect Dialect
	// Environ is the submitting environment ("K=V" entries), read by
	// --export=NAME, --export=ALL and qsub's -v NAME and -V. Nil: none.
	Environ []string
	// ScriptArgs are the script's own arguments (sbatch script.sh ARGS).
	ScriptArgs []string
	// DefaultName is the job name when no directive gives one (sbatch
	// uses the script's file name, "wrap" for --wrap, "sbatch" for stdin).
	DefaultName string
}

// Spec is a script's directives, translated. The JSON form is what the
// testdata corpus expects.
type Spec struct {
	Dialect      Dialect           `json:"dialect"`
	Name         string            `json:"name"`
	Nodes        int               `json:"nodes"`
	NTasks       int               `json:"ntasks"`         // total tasks (SLURM_NTASKS)
	TasksPerNode int               `json:"tasks_per_node"` // 0 = not given
	CPUsPerTask  int               `json:"cpus_per_task"`  // 1 unless given
	CoresPerNode int               `json:"cores_per_node"` // what each node must have; 0 = the site's default
	MemPerNode   int64             `json:"mem_per_node,omitempty"`
	GPUsPerNode  int               `json:"gpus_per_node,omitempty"`
	Walltime     time.Duration     `json:"walltime"`
	WalltimeSet  bool              `json:"walltime_set"`
	Partition    string            `json:"partition,omitempty"`
	Account      string            `json:"account,omitempty"`
	Stdout       string            `json:"stdout,omitempty"` // path pattern; "" = the site's job log
	Stderr       string            `json:"stderr,omitempty"` // "" = with stdout
	Array        string            `json:"array,omitempty"`
	After        []string          `json:"after,omitempty"`
	AfterOK      []string          `json:"afterok,omitempty"`
	AfterAny     []string          `json:"afterany,omitempty"`
	MailTypes    []string          `json:"mail_types,omitempty"` // BEGIN, END, FAIL
	MailUser     string            `json:"mail_user,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	Chdir        string            `json:"chdir,omitempty"`
	Interpreter  string            `json:"interpreter,omitempty"` // qsub -S; "" = the script's #! line
	Warnings     []Warning         `json:"warnings,omitempty"`
	// Body is the script as given, run as the job, with Args (sbatch
	// script.sh ARGS...) as its arguments.
	Body string   `json:"-"`
	Args []string `json:"args,omitempty"`
	// OrigName is the name asked for before it was made a valid gridsub
	// name ("" when it was valid); the job sees it as SLURM_JOB_NAME.
	OrigName string `json:"orig_name,omitempty"`
}

// DefaultWalltime is the time limit of a script that gives none (SLURM's
// is the partition's default, which gridsub cannot know for every site).
const DefaultWalltime = time.Hour

// Detect reports the directive language of data: SLURM for #SBATCH, PBS for
// #PBS, "" when it has neither; ok is whether data looks like a batch
// script at all (a #! line or a directive) rather than a YAML job file.
func Detect(data []byte) (d Dialect, ok bool) {
	s := string(data)
	ok = strings.HasPrefix(s, "#!")
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, "#SBATCH"):
			return SLURM, true
		case strings.HasPrefix(line, "#PBS"):
			if d == "" {
				d = PBS
			}
		}
	}
	return d, ok || d != ""
}

// Parse reads a batch script named file (for messages) with its directives
// and opts.Args. On refusal the error is Errors (every problem at once).
func Parse(file string, data []byte, opts Options) (*Spec, error) {
	if err := checkBody(file, data); err != nil {
		return nil, Errors{err}
	}
	body := string(data)
	d, _ := Detect(data)
	if d == "" {
		d = opts.Dialect
	}
	if d == "" {
		d = SLURM
	}
	p := &parser{file: file, environ: opts.Environ, s: &Spec{Dialect: d, Body: body, CPUsPerTask: 1, Args: opts.ScriptArgs}}
	lines := directives(body)
	for _, l := range lines {
		if l.late {
			p.warn(l.line, l.prefix+" "+strings.TrimSpace(l.text), "after the first command: ignored, as "+map[Dialect]string{SLURM: "sbatch", PBS: "qsub"}[l.dialect]+" ignores it")
			continue
		}
		if l.dialect != d {
			p.warn(l.line, l.prefix+" "+strings.TrimSpace(l.text), fmt.Sprintf("a %s directive in a script with %s directives: ignored (gridsub reads one language per script)", l.dialect, d))
			continue
		}
		words, err := split(l.text)
		if err != nil {
			p.fail(l.line, strings.TrimSpace(l.text), ErrValue, "%v", err)
			continue
		}
		p.options(l.line, d, words)
	}
	ad := opts.Dialect
	if ad == "" {
		ad = d
	}
	if len(opts.Args) > 0 {
		p.options(0, ad, opts.Args)
	}
	if p.s.Name == "" {
		p.s.Name = opts.DefaultName
		if p.s.Name == "" {
			p.s.Name = baseName(file)
		}
	}
	p.finish()
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, p.errs
	}
	return p.s, nil
}

func checkBody(file string, data []byte) *Error {
	switch {
	case len(data) > MaxScript:
		return &Error{File: file, Msg: fmt.Sprintf("is %d bytes; a batch script may be at most %d", len(data), MaxScript), Err: ErrScript}
	case slices.Contains(data, 0):
		return &Error{File: file, Msg: "contains a NUL byte: not a text script", Err: ErrScript}
	case strings.TrimSpace(string(data)) == "":
		return &Error{File: file, Msg: "is empty; give the commands to run", Err: ErrScript}
	}
	return nil
}

// baseName is the last element of a slash-separated path.
func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		return "sbatch"
	}
	return p
}

// line is one directive line.
type line struct {
	line    int
	dialect Dialect
	prefix  string // "#SBATCH" or "#PBS"
	text    string // after the prefix
	late    bool   // after the first command
}

// directives finds the directive lines: "#SBATCH" or "#PBS" at the start of
// a line followed by a blank; those after the first line that is neither
// blank nor a comment are marked late. The #! line is a comment.
func directives(body string) []line {
	var out []line
	late := false
	for i, l := range strings.Split(body, "\n") {
		l = strings.TrimSuffix(l, "\r")
		var d Dialect
		var prefix string
		switch {
		case hasDirective(l, "#SBATCH"):
			d, prefix = SLURM, "#SBATCH"
		case hasDirective(l, "#PBS"):
			d, prefix = PBS, "#PBS"
		}
		if d != "" {
			out = append(out, line{line: i + 1, dialect: d, prefix: prefix, text: l[len(prefix):], late: late})
			continue
		}
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			late = true
		}
	}
	return out
}

func hasDirective(l, prefix string) bool {
	if !strings.HasPrefix(l, prefix) {
		return false
	}
	rest := l[len(prefix):]
	return rest == "" || rest[0] == ' ' || rest[0] == '\t'
}

// split splits a directive's text into words as a shell would: blanks
// separate, single and double quotes group, a backslash escapes, and an
// unquoted '#' after a blank starts a comment.
func split(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false // inside a word
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#' && !in:
			return words, nil
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// parser collects a Spec and its problems.
type parser struct {
	file    string
	environ []string
	s       *Spec
	errs    Errors
	// what was given, for the arithmetic in finish
	nodesSet, ntasksSet bool
	memPerCPU           int64
	memTotal            int64 // PBS -l mem=: the whole job's
	gpusTotal           int   // --gpus=N: the whole job's
	gpusPerTask         int
	gpuLine             int
	export              string // --export value as given ("" = not given)
	exportLine          int
	joined              bool // PBS -j oe
}

func (p *parser) fail(ln int, directive string, sentinel error, format string, a ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: ln, Directive: directive, Msg: fmt.Sprintf(format, a...), Err: sentinel})
}

func (p *parser) warn(ln int, directive, msg string) {
	p.s.Warnings = append(p.s.Warnings, Warning{Line: ln, Directive: directive, Msg: msg})
}

func (p *parser) options(ln int, d Dialect, words []string) {
	if d == PBS {
		p.pbsOptions(ln, words)
		return
	}
	p.slurmOptions(ln, words)
}

// lookupEnv reads the submitting environment.
func (p *parser) lookupEnv(k string) (string, bool) {
	for _, kv := range p.environ {
		if n, v, ok := strings.Cut(kv, "="); ok && n == k {
			return v, true
		}
	}
	return "", false
}

// SplitArgs splits an sbatch (SLURM) or qsub (PBS) command line into its
// options, in order, and the rest: the script and its arguments. It stops
// at the first word that is neither an option nor an option's value, or
// after "--". An unknown option is kept as one word (Parse refuses it).
func SplitArgs(d Dialect, args []string) (opts, rest []string) {
	table := slurmOpts
	if d == PBS {
		table = pbsOpts
	}
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w == "--":
			return opts, args[i+1:]
		case d == SLURM && strings.HasPrefix(w, "--"):
			name, _, eq := strings.Cut(w[2:], "=")
			opts = append(opts, w)
			if o := findLong(table, name); o != nil && o.arg && !eq && i+1 < len(args) {
				i++
				opts = append(opts, args[i])
			}
		case len(w) >= 2 && w[0] == '-':
			opts = append(opts, w)
			if o := findShort(table, w[1]); o != nil && o.arg && len(w) == 2 && i+1 < len(args) {
				i++
				opts = append(opts, args[i])
			}
		default:
			return opts, args[i:]
		}
	}
	return opts, nil
}
