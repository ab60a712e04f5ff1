package sshbatch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gridsub/gridsub/backends/transport"
)

// Program is the script's $0: the fourth word of a batch's argv, by which
// a remote side (and cmdName in the backends) recognises a batch.
const Program = "gridsub-batch"

// Shell runs the script. An absolute path: the login PATH is not trusted
// to name the shell.
const Shell = "/bin/sh"

// DefaultMaxBytes bounds the quoted command line of one batch: sshd runs
// it as `$SHELL -c <line>`, and Linux refuses one argument over 128 KiB
// (MAX_ARG_STRLEN).
const DefaultMaxBytes = 120 << 10

// DefaultMaxCommands bounds the commands of one batch, so one batch's run
// time (about 5–10 ms per sbatch/qsub) stays well below a second or two.
const DefaultMaxCommands = 256

// Sentinel errors of the package.
var (
	// ErrCommand: a Command cannot be put in a batch (no argv, a NUL byte, a
	// newline in a word, stdin that does not end with a newline). The wrapping error names the
	// command and the problem.
	ErrCommand = errors.New("command cannot be batched")
	// ErrScript: Decode was given text that is not a batch script as Build
	// writes it; the wrapping error names the line.
	ErrScript = errors.New("not a gridsub batch script")
)

// Command is one remote command of a batch: its argv (each word reaches
// the program literally) and the text on its standard input ("" = none,
// else it must end with a newline: a here-document always does).
type Command struct {
	Argv  []string
	Stdin string
}

// Batch is one remote command running several Commands in order.
type Batch struct {
	Argv  []string // Shell, "-c", the script, Program
	Index []int    // the positions of its commands in Build's input, ascending
	Nonce string   // the markers' nonce
}

// Script is the batch's script text (Argv[2]).
func (b *Batch) Script() string { return b.Argv[2] }

// Check reports why c cannot be batched, or nil.
func (c *Command) Check() error {
	if len(c.Argv) == 0 {
		return fmt.Errorf("%w: empty argv", ErrCommand)
	}
	for i, w := range c.Argv {
		if strings.IndexByte(w, 0) >= 0 {
			return fmt.Errorf("%w: argv[%d] contains a NUL byte", ErrCommand, i)
		}
		if strings.IndexByte(w, '\n') >= 0 {
			return fmt.Errorf("%w: argv[%d] contains a newline (a batch has one line per command)", ErrCommand, i)
		}
	}
	if strings.IndexByte(c.Stdin, 0) >= 0 {
		return fmt.Errorf("%w: stdin contains a NUL byte (a here-document carries text only)", ErrCommand)
	}
	if c.Stdin != "" && !strings.HasSuffix(c.Stdin, "\n") {
		return fmt.Errorf("%w: stdin does not end with a newline (a here-document always adds one)", ErrCommand)
	}
	return nil
}

// delimiter picks command k's here-document delimiter: GRIDSUB_STDIN_<k>,
// with "_<i>" appended while it equals a line of stdin.
func delimiter(k int, stdin string) string {
	base := "GRIDSUB_STDIN_" + strconv.Itoa(k)
	ls := strings.Split(stdin, "\n")
	for i := 0; ; i++ {
		d := base
		if i > 0 {
			d += "_" + strconv.Itoa(i)
		}
		clash := false
		for _, l := range ls {
			if l == d {
				clash = true
				break
			}
		}
		if !clash {
			return d
		}
	}
}

// body renders command c as the k-th of a batch with the given nonce.
func body(sb *strings.Builder, nonce string, k int, c *Command) {
	ks := strconv.Itoa(k)
	fmt.Fprintf(sb, "printf '#gridsub-job %s %s\\n' || exit 1; printf '#gridsub-job %s %s\\n' >&2\n", nonce, ks, nonce, ks)
	sb.WriteString(transport.Quote(c.Argv))
	if c.Stdin == "" {
		sb.WriteString(" </dev/null\n")
	} else {
		d := delimiter(k, c.Stdin)
		sb.WriteString(" <<'" + d + "'\n")
		sb.WriteString(c.Stdin)
		sb.WriteString(d + "\n")
	}
	fmt.Fprintf(sb, "r=$?; printf '\\n#gridsub-rc %s %s %%d\\n' \"$r\"; printf '\\n#gridsub-rc %s %s %%d\\n' \"$r\" >&2\n", nonce, ks, nonce, ks)
}

// nonceOf is 16 hex digits of a SHA-256 of the commands.
func nonceOf(cmds []Command, idx []int) string {
	h := sha256.New()
	for _, i := range idx {
		for _, w := range cmds[i].Argv {
			h.Write([]byte(w))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
		h.Write([]byte(cmds[i].Stdin))
		h.Write([]byte{2})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// render builds the batch of cmds[idx...].
func render(cmds []Command, idx []int) Batch {
	nonce := nonceOf(cmds, idx)
	var sb strings.Builder
	fmt.Fprintf(&sb, "# %s v1 %s %d\n", Program, nonce, len(idx))
	for k, i := range idx {
		body(&sb, nonce, k, &cmds[i])
	}
	return Batch{Argv: []string{Shell, "-c", sb.String(), Program}, Index: idx, Nonce: nonce}
}

// quotedLen is len(transport.Quote([]string{s})) without building it.
func quotedLen(s string) int { return len(s) + 2 + 3*strings.Count(s, "'") }

// Build puts cmds into as few batches as fit: each batch's quoted command
// line (transport.Quote of its Argv) is at most maxBytes (0 means
// DefaultMaxBytes) and it runs at most maxCmds commands (0 means
// DefaultMaxCommands). Commands keep their order. A command too large to
// share any batch is returned in alone (its index), for the caller to run
// by itself with its stdin streamed. An invalid command fails the whole
// Build (a backend builds its commands itself: that is a bug).
func Build(cmds []Command, maxBytes, maxCmds int) (batches []Batch, alone []int, err error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxCmds <= 0 {
		maxCmds = DefaultMaxCommands
	}
	for i := range cmds {
		if err := cmds[i].Check(); err != nil {
			return nil, nil, fmt.Errorf("command %d: %w", i, err)
		}
	}
	// The fixed parts: "/bin/sh -c " + quoted script + " gridsub-batch",
	// the header line, and per command its lines with a 16-digit nonce.
	fixed := len(Shell) + len(" -c ") + 1 + len(Program) + quotedLen(fmt.Sprintf("# %s v1 %016d %d\n", Program, 0, len(cmds)))
	cost := func(k, i int) int {
		var sb strings.Builder
		body(&sb, "0123456789abcdef", k, &cmds[i])
		return quotedLen(sb.String()) - 2
	}
	var cur []int
	size := fixed
	flush := func() {
		if len(cur) > 0 {
			batches = append(batches, render(cmds, cur))
		}
		cur, size = nil, fixed
	}
	for i := range cmds {
		c := cost(len(cur), i)
		if len(cur) > 0 && (size+c > maxBytes || len(cur) >= maxCmds) {
			flush()
			c = cost(0, i)
		}
		if size+c > maxBytes {
			alone = append(alone, i)
			continue
		}
		cur = append(cur, i)
		size += c
	}
	flush()
	return batches, alone, nil
}
