package sshbatch

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

var (
	headerRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^# ` + Program + ` v1 ([0-9a-f]{16}) ([0-9]+)$`) })
	hereRe   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(` <<'(GRIDSUB_STDIN_[0-9]+(?:_[0-9]+)?)'$`) })
)

// Decode reads a script written by Build back into its nonce and commands,
// strictly: anything else is an error wrapping ErrScript that names the
// line. It is what an SSH-served simulated site uses to run a batch
// without a shell, and Build → Decode is the identity.
func Decode(script string) (nonce string, cmds []Command, err error) {
	ls := strings.SplitAfter(script, "\n")
	if len(ls) > 0 && ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	bad := func(i int, why string) error {
		return fmt.Errorf("%w: line %d: %s", ErrScript, i+1, why)
	}
	if len(ls) == 0 {
		return "", nil, bad(0, "empty script")
	}
	m := headerRe().FindStringSubmatch(strings.TrimSuffix(ls[0], "\n"))
	if m == nil {
		return "", nil, bad(0, "not the header \"# "+Program+" v1 <nonce> <n>\"")
	}
	nonce = m[1]
	n, err := strconv.Atoi(m[2])
	if err != nil {
		return "", nil, bad(0, "command count out of range")
	}
	i := 1
	for k := 0; k < n; k++ {
		ks := strconv.Itoa(k)
		want := fmt.Sprintf("printf '#gridsub-job %s %s\\n' || exit 1; printf '#gridsub-job %s %s\\n' >&2\n", nonce, ks, nonce, ks)
		if i >= len(ls) || ls[i] != want {
			return "", nil, bad(i, "want the start marker of command "+ks)
		}
		i++
		if i >= len(ls) || !strings.HasSuffix(ls[i], "\n") {
			return "", nil, bad(i, "want command "+ks)
		}
		line := strings.TrimSuffix(ls[i], "\n")
		var c Command
		var delim string
		if rest, ok := strings.CutSuffix(line, " </dev/null"); ok {
			line = rest
		} else if m := hereRe().FindStringSubmatchIndex(line); m != nil {
			delim = line[m[2]:m[3]]
			line = line[:m[0]]
		} else {
			return "", nil, bad(i, "command "+ks+" has neither </dev/null nor a here-document")
		}
		c.Argv, err = Unquote(line)
		if err != nil {
			return "", nil, bad(i, err.Error())
		}
		i++
		if delim != "" {
			var sb strings.Builder
			for ; i < len(ls) && ls[i] != delim+"\n"; i++ {
				sb.WriteString(ls[i])
			}
			if i >= len(ls) {
				return "", nil, bad(i, "here-document of command "+ks+" has no end line "+delim)
			}
			i++
			c.Stdin = sb.String()
			if c.Stdin == "" {
				return "", nil, bad(i-1, "empty here-document (Build writes </dev/null)")
			}
		}
		want = fmt.Sprintf("r=$?; printf '\\n#gridsub-rc %s %s %%d\\n' \"$r\"; printf '\\n#gridsub-rc %s %s %%d\\n' \"$r\" >&2\n", nonce, ks, nonce, ks)
		if i >= len(ls) || ls[i] != want {
			return "", nil, bad(i, "want the end marker of command "+ks)
		}
		i++
		cmds = append(cmds, c)
	}
	if i != len(ls) {
		return "", nil, bad(i, "text after the last command")
	}
	return nonce, cmds, nil
}

// Unquote splits a command line written by transport.Quote back into its
// words: words separated by one space, each a run of bare characters
// (letters, digits, _-+.,/:@%) and single-quoted parts, where a single
// quote inside a word is written as quote, backslash, quote, quote. Anything else (a $, a backslash
// outside that form, an unterminated quote) is an error.
func Unquote(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ':
			if !inWord {
				return nil, fmt.Errorf("unquoting: empty word at byte %d", i)
			}
			words = append(words, w.String())
			w.Reset()
			inWord = false
			i++
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unquoting: unterminated quote at byte %d", i)
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
			w.WriteByte('\'')
			inWord = true
			i += 2
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("_-+.,/:@%", c) >= 0:
			w.WriteByte(c)
			inWord = true
			i++
		default:
			return nil, fmt.Errorf("unquoting: unexpected %q at byte %d", c, i)
		}
	}
	if !inWord {
		return nil, fmt.Errorf("unquoting: empty command line or trailing space")
	}
	return append(words, w.String()), nil
}
