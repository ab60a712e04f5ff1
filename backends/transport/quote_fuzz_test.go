package transport

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A fast fuzz target of Quote with a pure Go reference splitter in its
// body; TestSplitterAgreesWithSh holds the splitter to a real /bin/sh, and
// FuzzQuote (quote_test.go) runs sh itself on every input, more slowly.

// errUnquoted: the command line holds a character the shell would act on
// (expansion, globbing, redirection, a separator, an assignment).
var errUnquoted = errors.New("character the shell interprets, outside quotes")

// splitWords splits a POSIX sh command line made only of literal words:
// blanks between words, single-quoted strings, a backslash before a
// character, and unquoted characters that no shell treats specially (in
// any position, the first word's included). Anything else is an error, so
// a Quote output that splits is one the shell cannot read differently.
func splitWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated single quote at %d", i)
			}
			w.WriteString(line[i+1 : i+1+end])
			i += 1 + end
			inWord = true
		case c == '\\':
			if i+1 >= len(line) || line[i+1] == '\n' {
				return nil, fmt.Errorf("%w: backslash at the end of a line (%d)", errUnquoted, i)
			}
			i++
			w.WriteByte(line[i])
			inWord = true
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("_-+.,/:@%", c) >= 0:
			w.WriteByte(c)
			inWord = true
		default:
			return nil, fmt.Errorf("%w: %q at %d", errUnquoted, c, i)
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// FuzzQuoteWords: every argv without a NUL quotes to a line the reference
// splitter gives back word for word, with nothing the shell would expand,
// glob, redirect or take as an assignment, whatever the position.
func FuzzQuoteWords(f *testing.F) {
	for _, s := range quoteSeeds {
		f.Add(strings.Join(s, "\x01"))
	}
	f.Add("NAME=1\x01x")
	f.Add("a=b=c")
	f.Add("'\x01''\x01'''\x01\\'")
	f.Fuzz(func(t *testing.T, joined string) {
		if strings.IndexByte(joined, 0) >= 0 {
			t.Skip("NUL cannot be in an argv")
		}
		argv := strings.Split(joined, "\x01")
		line := Quote(argv)
		got, err := splitWords(line)
		if err != nil {
			t.Fatalf("Quote(%q) = %s: %v", argv, line, err)
		}
		if !slices.Equal(got, argv) {
			t.Fatalf("Quote(%q) = %s, which splits into %q", argv, line, got)
		}
	})
}

// TestSplitterAgreesWithSh checks the reference splitter against /bin/sh:
// for lines it accepts, sh sees the same words; lines with something sh
// would interpret are refused.
func TestSplitterAgreesWithSh(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	lines := []string{`a b`, `'' x`, `'a b'c\ d`, `'it'\''s'`, `\'`, `'$HOME' '$(id)' '*'`, `x\$y`, `'two
lines'`, `  lead  trail  `}
	for _, argv := range quoteSeeds {
		lines = append(lines, Quote(argv))
	}
	for _, line := range lines {
		want, err := splitWords(line)
		if err != nil {
			t.Fatalf("splitWords(%q): %v", line, err)
		}
		out, err := exec.Command("sh", "-c", "printf '%s\\0' "+line).Output()
		if err != nil {
			t.Fatalf("sh on %q: %v", line, err)
		}
		got := strings.Split(string(out), "\x00")
		got = got[:len(got)-1]
		if len(want) == 0 {
			want = []string{""} // printf with no argument prints its format once
		}
		if !slices.Equal(got, want) {
			t.Errorf("line %q: sh saw %q, splitWords %q", line, got, want)
		}
	}
	for _, line := range []string{`$HOME`, `a;b`, `a|b`, `a&b`, `a>b`, `a<b`, "`id`", `*`, `a?`, `[a]`, `~`, `#x`, `a=b`, `"x"`, `(x)`, `{a,b}`, `!x`, "a\tb", "a\nb", `'open`, `x\`} {
		if words, err := splitWords(line); err == nil {
			t.Errorf("splitWords(%q) = %q, want it refused", line, words)
		}
	}
}
