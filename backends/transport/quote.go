package transport

import "strings"

// Quote turns argv into one POSIX sh command line in which every word stays
// literal: words made only of safe characters are left as they are, every
// other word is put in single quotes (an embedded single quote is written as
// quote, backslash, quote, quote). So "$(touch /tmp/owned); rm -rf ~",
// quotes, newlines, spaces, globs and a leading "~" or "#" all reach the
// program as the one word they were. An empty word becomes a pair of single
// quotes. Words containing "=" are quoted too, so that a word in command
// position is never taken as a variable assignment, and so is a first word
// that the shell would read as a keyword ("if", "time", "while", ...): the
// first word always names the program to run.
//
// The remote login shell must be POSIX-like (sh, bash, dash, ksh, zsh); csh
// and fish quote differently. A NUL byte cannot be passed in an argv at all;
// Client.Run refuses such words (Quote itself leaves them as they are).
func Quote(argv []string) string {
	var b strings.Builder
	for i, w := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i == 0 && shellKeywords[w] {
			b.WriteString("'" + w + "'")
			continue
		}
		quoteWord(&b, w)
	}
	return b.String()
}

// shellKeywords are the reserved words of POSIX sh, bash, ksh and zsh made
// only of characters isSafe leaves bare (the others, like "!" or "[[", are
// quoted anyway).
var shellKeywords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "case": true, "esac": true,
	"for": true, "select": true, "while": true, "until": true, "do": true, "done": true, "in": true,
	"function": true, "time": true, "coproc": true, "repeat": true, "foreach": true, "end": true,
	"nocorrect": true, "noglob": true,
}

func quoteWord(b *strings.Builder, w string) {
	if w != "" && isSafe(w) {
		b.WriteString(w)
		return
	}
	b.WriteByte('\'')
	for i := 0; i < len(w); i++ {
		if w[i] == '\'' {
			b.WriteString(`'\''`)
		} else {
			b.WriteByte(w[i])
		}
	}
	b.WriteByte('\'')
}

// isSafe reports whether w needs no quoting in any position.
func isSafe(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("_-+.,/:@%", c) >= 0:
		default:
			return false
		}
	}
	return true
}
