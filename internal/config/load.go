package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/gridsub/gridsub/bridge/jobfile"
)

// TestbedDir is where scripts/slurm-testbed.sh keeps the local SLURM
// testbed (and its testbed.env) unless GRIDSUB_TESTBED_DIR says otherwise.
const TestbedDir = "/var/tmp/gridsub-local-testbed"

// testbedHint tells how to get the local testbed's environment.
func (p *loader) testbedHint() string {
	dir := TestbedDir
	if d, ok := p.lookup("GRIDSUB_TESTBED_DIR"); ok && d != "" {
		dir = d
	}
	return fmt.Sprintf("for the local SLURM testbed run `bash scripts/slurm-testbed.sh start && source %s/testbed.env` "+
		"(a testbed started by the team's shared slurm-sites.sh writes /var/tmp/gridsub-testbed/testbed.env instead), or export it", dir)
}

// loader walks the raw settings before they are decoded: it refuses secrets
// and unknown keys and expands ${VAR} references in strings.
type loader struct {
	source  string
	lookup  func(string) (string, bool)
	errs    Errors
	missing map[string][]string // unset variable -> keys that use it
	unset   map[string]bool     // variable -> set but empty
}

func (p *loader) fail(key string, sentinel error, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.source, Field: key, Msg: fmt.Sprintf(format, args...), Err: sentinel})
}

// secretWords are the parts of a key name that mark a secret.
var secretWords = []string{"password", "passwd", "passphrase", "token", "secret", "credential", "api_key", "apikey", "private_key"}

// looksSecret reports whether a key names a secret. A key ending in _file
// or _env says where a secret is (store.password_file, store.password_env),
// which is not one.
func looksSecret(key string) bool {
	k := strings.ToLower(key)
	if strings.HasSuffix(k, "_file") || strings.HasSuffix(k, "_env") {
		return false
	}
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// storeSecretAdvice is secretAdvice for the store section.
const storeSecretAdvice = "the database password does not belong in a configuration file; put it in a file (mode 0600) named by store.password_file, or in an environment variable named by store.password_env"

const secretAdvice = "secrets do not belong in a configuration file; authenticate with ssh.key_file (a private key file, readable only by you) or ssh.agent: true (keys held by ssh-agent)"

// fieldsOf maps the mapstructure tags of a struct type to their field types.
func fieldsOf(t reflect.Type) (map[string]reflect.Type, []string) {
	m := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("mapstructure"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		m[tag] = f.Type
		names = append(names, tag)
	}
	return m, names
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprint(v)
}

// walk checks v against type t at path and returns v with ${VAR} expanded.
func (p *loader) walk(v any, t reflect.Type, path string) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && t != reflect.TypeOf(time.Time{}):
		m, ok := v.(map[string]any)
		if !ok {
			if v != nil {
				p.fail(path, ErrInvalid, "must be a mapping, got %s", describe(v))
			}
			return v
		}
		fields, names := fieldsOf(t)
		for _, k := range sortedKeys(m) {
			key := join(path, k)
			if looksSecret(k) {
				advice := secretAdvice
				if path == "store" {
					advice = storeSecretAdvice
				}
				p.fail(key, ErrSecret, "refused: %s", advice)
				continue
			}
			ft, ok := fields[strings.ToLower(k)]
			if !ok {
				where := "at the top level"
				if path != "" {
					where = "in " + path
				}
				msg := fmt.Sprintf("unknown key `%s` %s (valid: %s)", k, where, strings.Join(names, ", "))
				if s := jobfile.Suggest(k, names); s != "" {
					msg += fmt.Sprintf("; did you mean `%s`?", s)
				}
				p.fail(key, ErrUnknownKey, "%s", msg)
				continue
			}
			m[k] = p.walk(m[k], ft, key)
		}
		return m
	case t.Kind() == reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			if v != nil {
				p.fail(path, ErrInvalid, "must be a list, got %s", describe(v))
			}
			return v
		}
		for i := range s {
			s[i] = p.walk(s[i], t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
		return s
	case t.Kind() == reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			if v != nil {
				p.fail(path, ErrInvalid, "must be a mapping, got %s", describe(v))
			}
			return v
		}
		for _, k := range sortedKeys(m) {
			if looksSecret(k) {
				p.fail(join(path, k), ErrSecret, "refused: %s", secretAdvice)
				continue
			}
			m[k] = p.walk(m[k], t.Elem(), join(path, k))
		}
		return m
	}
	if s, ok := v.(string); ok {
		out, ok := p.expand(path, s)
		if !ok {
			return v
		}
		if strings.Contains(out, "PRIVATE KEY-----") {
			p.fail(path, ErrSecret, "looks like an inline private key; refused: %s", secretAdvice)
			return v
		}
		v = out
	}
	return p.leaf(v, t, path)
}

// leaf converts a scalar to the Go type of its field, so that every type
// error is reported here with its key (values from ${VAR} and GRIDSUB_*
// overrides arrive as strings).
func (p *loader) leaf(v any, t reflect.Type, path string) any {
	if v == nil {
		return nil
	}
	s, isString := v.(string)
	switch {
	case t == durationType:
		if isString {
			d, err := jobfile.ParseDuration(s)
			if err != nil {
				p.fail(path, ErrInvalid, "%v", err)
				return nil
			}
			return d
		}
		if n, ok := v.(int); ok && n == 0 {
			return time.Duration(0)
		}
		p.fail(path, ErrInvalid, "must be a duration with a unit like \"575ms\", \"1s\" or \"1h30m\", got %s", describe(v))
		return nil
	case t == sizeType:
		if isString {
			n, err := jobfile.ParseSize(s)
			if err != nil {
				p.fail(path, ErrInvalid, "%v", err)
				return nil
			}
			return n
		}
		if n, ok := v.(int); ok && n >= 0 {
			return n
		}
		p.fail(path, ErrInvalid, "must be a size like \"10GiB\" or \"512MB\" or a number of bytes >= 0, got %s", describe(v))
		return nil
	case t == bandwidthType:
		if isString {
			b, err := ParseBandwidth(s)
			if err != nil {
				p.fail(path, ErrInvalid, "%v", err)
				return nil
			}
			return b
		}
		p.fail(path, ErrInvalid, "must be %s, got %s", bandwidthHint, describe(v))
		return nil
	}
	bad := func() any {
		p.fail(path, ErrInvalid, "must be %s, got %s", typeName(t), describe(v))
		return nil
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		switch x := v.(type) {
		case int:
			return x
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return int(x)
			}
		case string:
			if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
				return n
			}
		}
		return bad()
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		switch x := v.(type) {
		case int:
			if x >= 0 {
				return uint64(x)
			}
		case uint64:
			return x
		case string:
			if n, err := strconv.ParseUint(strings.TrimSpace(x), 10, 64); err == nil {
				return n
			}
		}
		return bad()
	case reflect.Float64, reflect.Float32:
		switch x := v.(type) {
		case int:
			return float64(x)
		case float64:
			return x
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return f
			}
		}
		return bad()
	case reflect.Bool:
		switch x := v.(type) {
		case bool:
			return x
		case string:
			if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
				return b
			}
		}
		return bad()
	case reflect.String:
		switch x := v.(type) {
		case string:
			return x
		case int, float64, bool, uint64:
			return fmt.Sprint(x)
		}
		return bad()
	}
	return v
}

var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// expand replaces ${VAR} and ${VAR:-default} in s; "$${" stands for a
// literal "${". An unset or empty VAR without a default is an error.
func (p *loader) expand(key, s string) (string, bool) {
	if !strings.Contains(s, "${") {
		return s, true
	}
	var b strings.Builder
	ok := true
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			p.fail(key, ErrInvalid, "unterminated ${ in %q; write ${NAME}", s)
			return "", false
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !envNameRE().MatchString(name) {
			p.fail(key, ErrInvalid, "${%s} is not a variable reference; write ${NAME} or ${NAME:-default} with NAME of letters, digits and '_'", ref)
			ok = false
			continue
		}
		val, set := p.lookup(name)
		switch {
		case set && val != "":
			b.WriteString(val)
		case hasDef:
			b.WriteString(def)
		default:
			if p.missing == nil {
				p.missing, p.unset = map[string][]string{}, map[string]bool{}
			}
			p.missing[name] = append(p.missing[name], key)
			p.unset[name] = set
			ok = false
		}
	}
	return b.String(), ok
}

// reportMissing adds one error per unset variable, naming the keys that
// use it.
func (p *loader) reportMissing() {
	names := make([]string, 0, len(p.missing))
	for n := range p.missing {
		names = append(names, n)
	}
	names = sortStrings(names)
	lastTestbed := -1 // the testbed advice is given once, after the last GRIDSUB_ variable
	for i, name := range names {
		if strings.HasPrefix(name, "GRIDSUB_") {
			lastTestbed = i
		}
	}
	for i, name := range names {
		keys := p.missing[name]
		state := "not set"
		if p.unset[name] {
			state = "empty"
		}
		msg := fmt.Sprintf("${%s} is %s", name, state)
		if len(keys) > 1 {
			msg += fmt.Sprintf(" (also used by %s)", strings.Join(keys[1:], ", "))
		}
		switch {
		case !strings.HasPrefix(name, "GRIDSUB_"):
			msg += "; export it"
		case strings.HasPrefix(name, "GRIDSUB_PBS_"):
			msg += "; for the local OpenPBS testbed run `bash scripts/pbs-testbed.sh start && source /var/tmp/gridsub-pbs/testbed.env`, or export it"
		case i == lastTestbed:
			msg += "; " + p.testbedHint()
		}
		p.errs = append(p.errs, &Error{File: p.source, Field: keys[0], Msg: msg, Err: ErrMissingEnv})
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortStrings(s []string) []string { sort.Strings(s); return s }

var (
	durationType  = reflect.TypeOf(time.Duration(0))
	bandwidthType = reflect.TypeOf(Bandwidth(0))
	sizeType      = reflect.TypeOf(Size(0))
)

// typeName says what a Go type means to a user.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64, reflect.Uint32:
		return "a whole number"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "a mapping"
	}
	return t.String()
}

// decodeErrors turns mapstructure's errors into Errors naming each key.
func (p *loader) decodeErrors(err error) error {
	var errs Errors
	var visit func(e error)
	visit = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				visit(x)
			}
			return
		}
		var de *mapstructure.DecodeError
		if !errors.As(e, &de) {
			errs = append(errs, &Error{File: p.source, Msg: e.Error(), Err: ErrInvalid})
			return
		}
		// Descend to the innermost DecodeError, which names the full key.
		inner := de.Unwrap()
		var deeper *mapstructure.DecodeError
		if errors.As(inner, &deeper) || isJoin(inner) {
			visit(inner)
			return
		}
		msg := inner.Error()
		var pe *mapstructure.ParseError
		var ue *mapstructure.UnconvertibleTypeError
		switch {
		case errors.As(inner, &pe):
			msg = fmt.Sprintf("must be %s, got %s", typeName(pe.Expected.Type()), describe(pe.Value))
		case errors.As(inner, &ue):
			msg = fmt.Sprintf("must be %s, got %s", typeName(ue.Expected.Type()), describe(ue.Value))
		}
		errs = append(errs, &Error{File: p.source, Field: de.Name(), Msg: msg, Err: ErrInvalid})
	}
	visit(err)
	if len(errs) == 0 {
		return &Error{File: p.source, Msg: err.Error(), Err: ErrInvalid}
	}
	return errs
}

func isJoin(e error) bool {
	_, ok := e.(interface{ Unwrap() []error })
	return ok
}
