package jobfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gridsub/gridsub/bridge/jobrules"
)

// MaxFileSize is the largest job file Parse and Load accept (1 MiB); Load
// reads no more than this (and one byte) of a file.
const MaxFileSize = 1 << 20

// Field names of each mapping, in the order the reference documents them.
var (
	topFields         = []string{"name", "command", "script", "args", "env", "setup", "workdir", "inputs", "outputs", "resources", "site_options", "scheduling", "simulate", "array", "sweep", "after", "afterok", "afterany"}
	inputFields       = []string{"local", "remote", "mode", "site", "path", "size"}
	resourceFields    = []string{"nodes", "cores_per_node", "memory_per_node", "gpus_per_node", "walltime"}
	schedulingFields  = []string{"origin", "data_size", "sites", "prefer", "no_split", "deadline", "qos", "benefit", "reservation", "deadline_policy"}
	benefitFields     = []string{"shape", "a", "b", "c"}
	reservationFields = []string{"earliest_start", "latest_end", "flexibility"}
	simulateFields    = []string{"runtime", "exit_code"}
)

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Load reads and parses the job file at path. Input local paths that are
// relative are resolved against the file's directory, and every input must be
// a readable regular file (ErrInput otherwise). Error messages name the file
// as path was given. The job file itself must be a regular file (not a
// FIFO, a device such as /dev/zero, or a directory: ErrFile) of at most
// MaxFileSize bytes; Load never reads more than that.
func Load(file string) (*Job, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	j, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return nil, fmt.Errorf("job file directory: %w", err)
	}
	j.dir = dir
	var errs ErrorList
	for _, j := range append([]*Job{j}, j.Steps...) {
		j.dir = dir
		errs = j.resolveInputs(dir, errs)
	}
	if err := errs.asError(); err != nil {
		return nil, err
	}
	return j, nil
}

// resolveInputs makes the inputs' local paths absolute (relative to dir)
// and checks that each is a readable regular file.
func (j *Job) resolveInputs(dir string, errs ErrorList) ErrorList {
	for i := range j.Inputs {
		in := &j.Inputs[i]
		if !filepath.IsAbs(in.Local) {
			in.Local = filepath.Join(dir, filepath.FromSlash(in.Local))
		}
		field := fmt.Sprintf("inputs[%d].local", i)
		st, err := os.Stat(in.Local)
		switch {
		case err != nil:
			errs = append(errs, j.errAt(field, ErrInput, fmt.Sprintf("cannot read %s: %v", in.Local, errors.Unwrap(err))))
		case st.IsDir():
			errs = append(errs, j.errAt(field, ErrInput, fmt.Sprintf("%s is a directory; list the files to stage one by one (or stage an archive)", in.Local)))
		case !st.Mode().IsRegular():
			errs = append(errs, j.errAt(field, ErrInput, fmt.Sprintf("%s is not a regular file", in.Local)))
		}
	}
	return errs
}

// readFile reads a job file: a regular file of at most MaxFileSize bytes.
// It opens without blocking (a FIFO would wait for a writer), checks what
// it opened, and reads through a limit.
func readFile(file string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("reading job file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading job file: %w", err)
	}
	switch {
	case st.IsDir():
		return nil, fmt.Errorf("%w: %s is a directory; give the path of a job file (e.g. job.yaml)", ErrFile, file)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file (it is a %s); a job file must be a plain file", ErrFile, file, fileKind(st.Mode()))
	case st.Size() > MaxFileSize:
		return nil, fmt.Errorf("%w: %s is %d bytes; a job file may be at most %d (1 MiB)", ErrFile, file, st.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading job file: %w", err)
	}
	if len(data) > MaxFileSize { // grew since the Stat
		return nil, fmt.Errorf("%w: %s is more than %d bytes; a job file may be at most %d (1 MiB)", ErrFile, file, MaxFileSize, MaxFileSize)
	}
	return data, nil
}

// fileKind names a file mode's type for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// Parse parses and validates a job file. filename is used only in error
// messages. It never reads the clock or the file system: relative times stay
// relative (see Job.Resolve) and input paths stay as written (see Load).
// On failure the error is an ErrorList holding every problem found.
func Parse(filename string, data []byte) (*Job, error) {
	p := &parser{file: filename, pos: map[string]Pos{}}
	j := p.parse(data)
	if err := p.errs.asError(); err != nil {
		return nil, err
	}
	j.file = filename
	j.pos = p.pos
	return j, nil
}

type parser struct {
	file string
	errs ErrorList
	pos  map[string]Pos
}

func posOf(n *yaml.Node) Pos { return Pos{Line: n.Line, Column: n.Column} }

func (p *parser) failAt(at Pos, field string, sentinel error, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{File: p.file, Pos: at, Field: field, Msg: fmt.Sprintf(format, args...), Err: sentinel})
}

func (p *parser) fail(n *yaml.Node, field string, sentinel error, format string, args ...any) {
	p.failAt(posOf(n), field, sentinel, format, args...)
}

// rule reports a broken jobrules rule at n; it returns whether err is nil.
// jobrules.ErrPath becomes ErrPath, anything else ErrValue.
func (p *parser) rule(n *yaml.Node, field string, err error) bool {
	if err == nil {
		return true
	}
	sentinel := ErrValue
	if errors.Is(err, jobrules.ErrPath) {
		sentinel = ErrPath
	}
	p.fail(n, field, sentinel, "%s", err.Error())
	return false
}

// describe says what a node holds, for "got ..." in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing"
		case "!!str":
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "an alias"
}

// deref follows aliases (a bounded number of times).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func (p *parser) parse(data []byte) *Job {
	j := &Job{Scheduling: Scheduling{QoS: QoSAuto}}
	if len(data) > MaxFileSize {
		p.failAt(Pos{}, "", ErrSyntax, "file is %d bytes; a job file may be at most %d", len(data), MaxFileSize)
		return j
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.failAt(Pos{Line: 1, Column: 1}, "", ErrRequired, "empty job file; a job needs at least name, command (or script) and resources (see examples/reference.yaml)")
		} else {
			p.syntax(err, data)
		}
		return j
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.failAt(Pos{Line: extra.Line, Column: extra.Column}, "", ErrSyntax, "a job file holds one YAML document; found a second one (remove the `---` separator)")
	} else if !errors.Is(err, io.EOF) {
		p.syntax(err, data)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = deref(root.Content[0])
	}
	if root == nil || root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		p.failAt(Pos{Line: 1, Column: 1}, "", ErrRequired, "empty job file; a job needs at least name, command (or script) and resources (see examples/reference.yaml)")
		return j
	}
	if root.Kind != yaml.MappingNode {
		p.fail(root, "", ErrType, "a job file is a mapping of fields (name: ..., command: ..., resources: ...), got %s", describe(root))
		return j
	}
	if isPipelineFile(root) { // group.go
		p.pipeline(root, j)
		return j
	}
	p.job(root, j)
	return j
}

// parserProblems are the messages of yaml.v3's parser errors, which carry a
// 0-based line number (its scanner errors carry a 1-based one), each with a
// hint.
var parserProblems = map[string]string{
	"did not find expected <document start>": "",
	"did not find expected node content":     "",
	"did not find expected '-' indicator":    "(check the indentation: is a field at the level of list items?)",
	"did not find expected key":              "(check the indentation of this line and the ones around it)",
	"did not find expected ',' or ']'":       "(is a [...] list left open?)",
	"did not find expected ',' or '}'":       "(is a {...} mapping left open?)",
	"found undefined tag handle":             "",
	"found duplicate %YAML directive":        "",
	"found incompatible YAML document":       "",
}

// syntax reports a YAML syntax error with the line yaml.v3 names, and
// says so when the cause is a tab in the indentation or a line indented
// deeper than its mapping (yaml.v3's own words name neither).
func (p *parser) syntax(err error, data []byte) {
	defer func() {
		if n := len(p.errs); n > 0 {
			if hint := indentHint(data, p.errs[n-1].Pos.Line); hint != "" {
				p.errs[n-1].Msg += " " + hint
			}
		}
	}()
	msg := err.Error()
	at := Pos{Line: 1} // yaml.v3 leaves the line out for line 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if l, e := strconv.Atoi(m[1]); e == nil {
			at.Line = l
		}
		msg = m[2]
		if ctx, ok := parserProblems[msg]; ok {
			// yaml.v3 reports parser (not scanner) errors with a 0-based
			// line: make it 1-based.
			at.Line++
			if ctx != "" {
				msg += " " + ctx
			}
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	p.failAt(at, "", ErrSyntax, "invalid YAML: %s", msg)
}

// indentHint explains a syntax error at line (1-based) by the file's
// indentation: a tab in the leading white space of a line up to it (YAML
// indents with spaces only), or the line indented deeper than the line
// above, which already has its value. "" when neither applies.
func indentHint(data []byte, line int) string {
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines) && i < line; i++ {
		lead := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
		if strings.ContainsRune(lead, '\t') && strings.TrimSpace(lines[i]) != "" {
			return fmt.Sprintf("(line %d is indented with a tab; YAML indents with spaces only: replace the tab with spaces)", i+1)
		}
	}
	if line < 2 || line > len(lines) {
		return ""
	}
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	cur := lines[line-1]
	prev := -1
	for i := line - 2; i >= 0; i-- {
		if t := strings.TrimSpace(lines[i]); t != "" && !strings.HasPrefix(t, "#") {
			prev = i
			break
		}
	}
	if prev < 0 || strings.TrimSpace(cur) == "" {
		return ""
	}
	above := strings.TrimSpace(lines[prev])
	if k, v, ok := strings.Cut(above, ": "); ok && k != "" && strings.TrimSpace(v) != "" && !strings.HasPrefix(above, "- ") &&
		indent(cur) > indent(lines[prev]) {
		return fmt.Sprintf("(line %d is indented deeper than line %d, whose %q already has a value: over-indented; line the keys of one mapping up)",
			line, prev+1, strings.TrimSpace(k))
	}
	return ""
}

// entry is one key/value pair of a mapping.
type entry struct{ key, val *yaml.Node }

// fields reads a mapping node, reports duplicate and unknown keys, records
// the position of every value under its field path and returns the entries by
// key. valid == nil accepts any key (env).
func (p *parser) fields(n *yaml.Node, path string, valid []string) map[string]entry {
	out := map[string]entry{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k == nil || v == nil {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			p.fail(k, path, ErrType, "field names must be plain words, got %s", describe(k))
			continue
		}
		child := join(path, k.Value)
		if prev, dup := out[k.Value]; dup {
			p.fail(k, child, ErrSyntax, "duplicate field (first given at line %d)", prev.key.Line)
			continue
		}
		if valid != nil && !contains(valid, k.Value) {
			where := "at the top level"
			if path != "" {
				where = "in " + path
			}
			msg := fmt.Sprintf("unknown field `%s` %s (valid: %s)", k.Value, where, strings.Join(valid, ", "))
			if s := Suggest(k.Value, valid); s != "" {
				msg += fmt.Sprintf("; did you mean `%s`?", s)
			}
			p.fail(k, "", ErrUnknownField, "%s", msg)
			continue
		}
		out[k.Value] = entry{k, v}
		p.pos[child] = posOf(v)
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// mapping checks that n is a mapping.
func (p *parser) mapping(n *yaml.Node, field, want string) bool {
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, ErrType, "must be %s, got %s", want, describe(n))
		return false
	}
	return true
}

// text reads a scalar as text. Numbers and booleans are taken as written.
func (p *parser) text(n *yaml.Node, field, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n, field, ErrType, "must be %s, got %s", want, describe(n))
		return "", false
	}
	return n.Value, true
}

// integer reads a whole number in [lo, hi].
func (p *parser) integer(n *yaml.Node, field string, lo, hi int64, want string) (int, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		p.fail(n, field, ErrType, "must be %s, got %s", want, describe(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil || v < lo {
		p.fail(n, field, ErrValue, "must be %s, got %s", want, n.Value)
		return 0, false
	}
	if v > hi {
		p.fail(n, field, ErrValue, "must be %s, got %s (at most %d)", want, n.Value, hi)
		return 0, false
	}
	return int(v), true
}

// number reads an integer or float (finite).
func (p *parser) number(n *yaml.Node, field, want string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		p.fail(n, field, ErrType, "must be %s, got %s", want, describe(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		p.fail(n, field, ErrValue, "must be %s, got %s", want, n.Value)
		return 0, false
	}
	return v, true
}

func (p *parser) boolean(n *yaml.Node, field string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		p.fail(n, field, ErrType, "must be true or false, got %s", describe(n))
		return false, false
	}
	var v bool
	if err := n.Decode(&v); err != nil {
		p.fail(n, field, ErrType, "must be true or false, got %s", describe(n))
		return false, false
	}
	return v, true
}

// words reads a list of scalars (an argv). A single scalar without blanks is
// taken as a one-word list; one with blanks is refused, since splitting it
// would guess at quoting.
func (p *parser) words(n *yaml.Node, field, example string) ([]string, bool) {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		if strings.ContainsAny(n.Value, " \t\n") {
			p.fail(n, field, ErrType, "must be a list of words like %s; a string with spaces would have to be split, which gridsub does not guess at (got %q)", example, n.Value)
			return nil, false
		}
		p.pos[field+"[0]"] = posOf(n)
		return []string{n.Value}, true
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, ErrType, "must be a list of words like %s, got %s", example, describe(n))
		return nil, false
	}
	if len(n.Content) > jobrules.MaxArgs {
		p.fail(n, field, ErrValue, "has %d words; at most %d", len(n.Content), jobrules.MaxArgs)
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, c := range n.Content {
		c = deref(c)
		f := fmt.Sprintf("%s[%d]", field, i)
		s, good := p.text(c, f, "a word (a string)")
		good = good && p.rule(c, f, jobrules.Word(s))
		ok = ok && good
		p.pos[f] = posOf(c)
		out = append(out, s)
	}
	return out, ok
}

// strings reads a list of strings; a single scalar counts as a list of one.
func (p *parser) strs(n *yaml.Node, field, want string) ([]string, []*yaml.Node, bool) {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	} else if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n, field, ErrType, "must be a list of %s, got %s", want, describe(n))
		return nil, nil, false
	}
	if len(items) > jobrules.MaxFiles {
		p.fail(n, field, ErrValue, "has %d entries; at most %d", len(items), jobrules.MaxFiles)
		return nil, nil, false
	}
	out := make([]string, 0, len(items))
	nodes := make([]*yaml.Node, 0, len(items))
	ok := true
	for i, c := range items {
		c = deref(c)
		f := fmt.Sprintf("%s[%d]", field, i)
		p.pos[f] = posOf(c)
		s, good := p.text(c, f, want)
		ok = ok && good
		out = append(out, s)
		nodes = append(nodes, c)
	}
	return out, nodes, ok
}

// relPath checks a path relative to the job directory: not empty, not
// absolute, not escaping with "..". allowDot permits "." (the job directory
// itself). It returns the cleaned path (keeping a trailing "/").
func (p *parser) relPath(n *yaml.Node, field, s string, allowDot bool) (string, bool) {
	c, err := jobrules.RelPath(s, allowDot)
	return c, p.rule(n, field, err)
}

func (p *parser) duration(n *yaml.Node, field string, positive bool) (time.Duration, bool) {
	s, ok := p.text(n, field, durationHint)
	if !ok {
		return 0, false
	}
	d, err := ParseDuration(s)
	if err != nil {
		p.fail(n, field, ErrValue, "%v", err)
		return 0, false
	}
	if positive && d <= 0 || d < 0 {
		want := ">= 0"
		if positive {
			want = "> 0"
		}
		p.fail(n, field, ErrValue, "must be %s, got %s", want, s)
		return 0, false
	}
	if d > jobrules.MaxWalltime {
		p.fail(n, field, ErrValue, "must be at most %s (365 days), got %s", jobrules.MaxWalltime, s)
		return 0, false
	}
	return d, true
}

func (p *parser) timeSpec(n *yaml.Node, field string) (TimeSpec, bool) {
	s, ok := p.text(n, field, timeHint)
	if !ok {
		return TimeSpec{}, false
	}
	t, err := ParseTime(s)
	if err != nil {
		p.fail(n, field, ErrValue, "%v", err)
		return TimeSpec{}, false
	}
	if t.Relative && !p.rule(n, field, jobrules.Offset(t.Rel)) {
		return TimeSpec{}, false
	}
	if !t.Relative && t.Abs.Year() < 1970 {
		// Year 0001 would even read as "no time given" (the zero time).
		p.fail(n, field, ErrValue, "%s is before 1970; give the real time, e.g. 2026-12-01T12:00:00Z, or a relative one like +4h", s)
		return TimeSpec{}, false
	}
	return t, true
}

func (p *parser) job(root *yaml.Node, j *Job) {
	f := p.fields(root, "", topFields)
	rootPos := posOf(root)

	if e, ok := f["name"]; ok {
		if s, ok := p.text(e.val, "name", "a job name"); ok {
			p.rule(e.val, "name", jobrules.Name(s))
			j.Name = s
		}
	} else {
		p.failAt(rootPos, "name", ErrRequired, "missing; give the job a name of 1-64 letters, digits, '.', '_' or '-' (e.g. name: hello)")
	}

	cmd, hasCmd := f["command"]
	scr, hasScr := f["script"]
	switch {
	case hasCmd && hasScr:
		later := scr
		field := "script"
		if cmd.key.Line > scr.key.Line {
			later, field = cmd, "command"
		}
		p.fail(later.key, field, ErrConflict, "give exactly one of command (an argv list) or script (a bash script body), not both (command at line %d, script at line %d)", cmd.key.Line, scr.key.Line)
	case !hasCmd && !hasScr:
		p.failAt(rootPos, "command", ErrRequired, `missing; give exactly one of command (an argv list like ["/bin/echo", "hello"]) or script (a bash script body)`)
	case hasCmd:
		if w, ok := p.words(cmd.val, "command", `["/bin/echo", "hello"]`); ok {
			if len(w) == 0 || w[0] == "" {
				p.fail(cmd.val, "command", ErrRequired, `must name a program to run, like ["/bin/echo", "hello"]`)
			}
			j.Command = w
		}
	case hasScr:
		if s, ok := p.text(scr.val, "script", "a bash script body (use `script: |` and indent the lines)"); ok {
			if strings.TrimSpace(s) == "" {
				p.fail(scr.val, "script", ErrRequired, "is empty; give the bash commands to run")
			} else {
				p.rule(scr.val, "script", jobrules.Script(s))
			}
			j.Script = s
		}
	}

	if e, ok := f["args"]; ok {
		if hasScr && !hasCmd {
			p.fail(e.key, "args", ErrConflict, "args are appended to command; a script job takes none (put the arguments in the script)")
		} else if w, ok := p.words(e.val, "args", `["--n", "4"]`); ok {
			j.Args = w
		}
	}

	if e, ok := f["env"]; ok && p.mapping(e.val, "env", `a mapping of variable names to values, like {OMP_NUM_THREADS: "4"}`) {
		env := p.fields(e.val, "env", nil)
		if len(env) > jobrules.MaxEnvVars {
			p.fail(e.val, "env", ErrValue, "has %d variables; at most %d", len(env), jobrules.MaxEnvVars)
			env = nil
		}
		j.Env = make(map[string]string, len(env))
		for k, kv := range env {
			field := "env." + k
			if !p.rule(kv.key, field, jobrules.EnvName(k)) {
				continue
			}
			v, ok := p.text(kv.val, field, `a value (a string; use "" for an empty one)`)
			if ok {
				p.rule(kv.val, field, jobrules.EnvValue(v))
			}
			j.Env[k] = v
		}
	}

	if e, ok := f["workdir"]; ok {
		if s, ok := p.text(e.val, "workdir", "a path relative to the job directory"); ok {
			if c, ok := p.relPath(e.val, "workdir", s, true); ok && c != "." {
				j.WorkDir = strings.TrimSuffix(c, "/")
			}
		}
	}

	if e, ok := f["inputs"]; ok {
		p.inputs(e.val, j)
	}

	if e, ok := f["outputs"]; ok {
		outs, nodes, _ := p.strs(e.val, "outputs", "paths relative to the job directory")
		seen := map[string]int{}
		for i, s := range outs {
			field := fmt.Sprintf("outputs[%d]", i)
			if c, ok := p.relPath(nodes[i], field, s, false); ok {
				if line, dup := seen[c]; dup {
					p.fail(nodes[i], field, ErrValue, "%q is already listed at line %d", s, line)
					continue
				}
				seen[c] = nodes[i].Line
				j.Outputs = append(j.Outputs, c)
			}
		}
	}

	if e, ok := f["resources"]; ok {
		p.resources(e, j)
	} else {
		p.failAt(rootPos, "resources", ErrRequired, "missing; give at least resources.nodes and resources.walltime, e.g. resources: {nodes: 1, walltime: 10m}")
	}

	if e, ok := f["scheduling"]; ok {
		p.scheduling(e, j)
	}
	p.siteData(j) // sitefile.go
	p.batchOptions(f, j)

	if e, ok := f["simulate"]; ok && p.mapping(e.val, "simulate", "a mapping with runtime and exit_code") {
		sf := p.fields(e.val, "simulate", simulateFields)
		if kv, ok := sf["runtime"]; ok {
			if d, ok := p.duration(kv.val, "simulate.runtime", true); ok {
				j.Simulate.Runtime = d
			}
		}
		if kv, ok := sf["exit_code"]; ok {
			if v, ok := p.integer(kv.val, "simulate.exit_code", 0, 255, "a whole number 0..255"); ok {
				j.Simulate.ExitCode = v
			}
		}
	}
	p.groupAndDeps(f, j) // group.go
}

func (p *parser) inputs(n *yaml.Node, j *Job) {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	} else if n.Kind != yaml.MappingNode && (n.Kind != yaml.ScalarNode || isNull(n)) {
		p.fail(n, "inputs", ErrType, "must be a list of files, each a path or {local: ..., remote: ...}, got %s", describe(n))
		return
	}
	if len(items) > jobrules.MaxFiles {
		p.fail(n, "inputs", ErrValue, "has %d files; at most %d", len(items), jobrules.MaxFiles)
		return
	}
	seen := map[string]int{}
	for i, it := range items {
		it = deref(it)
		field := fmt.Sprintf("inputs[%d]", i)
		p.pos[field] = posOf(it)
		var in Input
		localNode, remoteNode := it, (*yaml.Node)(nil)
		switch it.Kind {
		case yaml.ScalarNode:
			s, ok := p.text(it, field, "a local path or {local: ..., remote: ...}")
			if !ok {
				continue
			}
			in.Local = s
			p.pos[field+".local"] = posOf(it)
		case yaml.MappingNode:
			f := p.fields(it, field, inputFields)
			if _, ok := f["site"]; ok {
				p.siteInput(it, field, f, j, seen) // sitefile.go
				continue
			}
			if err := siteOnly(f); err != "" {
				p.fail(f[err].key, field+"."+err, ErrConflict, "needs site: (%s is the path of a file that already lies at a site)", err)
				continue
			}
			kv, ok := f["local"]
			if !ok {
				p.fail(it, field+".local", ErrRequired, "missing; give the path of the file on this machine (relative to the job file's directory)")
				continue
			}
			localNode = kv.val
			s, ok := p.text(kv.val, field+".local", "a path on this machine")
			if !ok {
				continue
			}
			in.Local = s
			if kv, ok := f["remote"]; ok {
				remoteNode = kv.val
				if s, ok := p.text(kv.val, field+".remote", "a path relative to the job directory"); ok {
					in.Remote = s
				}
			}
			if kv, ok := f["mode"]; ok {
				s, ok := p.text(kv.val, field+".mode", `an octal file mode like "0755"`)
				if ok {
					m, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0"), 8, 32)
					if s == "0" || s == "0o0" {
						m, err = 0, nil
					}
					if err != nil || m > 0o777 {
						p.fail(kv.val, field+".mode", ErrValue, `must be an octal file mode 0..0777 like "0755", got %s`, s)
					} else {
						in.Mode = fs.FileMode(m)
					}
				}
			}
		default:
			p.fail(it, field, ErrType, "must be a local path or {local: ..., remote: ...}, got %s", describe(it))
			continue
		}
		if in.Local == "" || strings.ContainsRune(in.Local, 0) || len(in.Local) > jobrules.MaxPathLen {
			p.fail(localNode, field+".local", ErrValue, "must be a path to a file on this machine, got %q", in.Local)
			continue
		}
		rfield, rnode := field+".remote", remoteNode
		if in.Remote == "" {
			in.Remote = path.Base(filepath.ToSlash(in.Local))
			rfield, rnode = field+".local", localNode
			if in.Remote == "." || in.Remote == "/" || in.Remote == ".." {
				p.fail(localNode, field+".local", ErrValue, "%q does not name a file; give a file path (or a remote name)", in.Local)
				continue
			}
		}
		c, ok := p.relPath(rnode, rfield, in.Remote, false)
		if !ok {
			continue
		}
		if strings.HasSuffix(c, "/") {
			c = strings.TrimSuffix(c, "/") + "/" + path.Base(filepath.ToSlash(in.Local))
		}
		in.Remote = c
		if line, dup := seen[c]; dup {
			p.fail(rnode, rfield, ErrValue, "remote name %q is already used by the input at line %d; give a distinct remote name", c, line)
			continue
		}
		seen[c] = rnode.Line
		j.Inputs = append(j.Inputs, in)
	}
}

func (p *parser) resources(e entry, j *Job) {
	if !p.mapping(e.val, "resources", "a mapping with nodes, cores_per_node and walltime") {
		return
	}
	f := p.fields(e.val, "resources", resourceFields)
	at := posOf(e.key)
	if kv, ok := f["nodes"]; ok {
		if v, ok := p.integer(kv.val, "resources.nodes", 1, jobrules.MaxNodes, "a whole number >= 1"); ok {
			j.Resources.Nodes = v
		}
	} else {
		p.failAt(at, "resources.nodes", ErrRequired, "missing; give the number of nodes the job needs (a whole number >= 1)")
	}
	if kv, ok := f["cores_per_node"]; ok {
		if v, ok := p.integer(kv.val, "resources.cores_per_node", 1, jobrules.MaxCoresPerNode, "a whole number >= 1"); ok {
			j.Resources.CoresPerNode = v
		}
	}
	p.nodeShape(f, j)
	if kv, ok := f["walltime"]; ok {
		if d, ok := p.duration(kv.val, "resources.walltime", true); ok {
			j.Resources.Walltime = d
		}
	} else {
		p.failAt(at, "resources.walltime", ErrRequired, "missing; give the run time estimate on the reference machine, e.g. walltime: 30m or 01:30:00")
	}
}
