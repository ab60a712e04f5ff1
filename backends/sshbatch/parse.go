package sshbatch

import (
	"bytes"
	"io"
	"strconv"
)

// Output is what one command of a batch produced.
type Output struct {
	// Started: the command's start marker was read on stdout, so the shell
	// reached it (the command may have run even when Done is false).
	Started bool
	// Done: its end marker was read on stdout; ExitCode is its exit status
	// and Stdout all it wrote. A command not Done has an unknown outcome.
	Done     bool
	ExitCode int
	Stdout   []byte
	Stderr   []byte // what it wrote to stderr (all of it once the stderr end marker was read)
}

// section finds command k's part of one stream from pos: the text between
// its start marker (at the start of a line) and its end marker, and the
// exit status the end marker gives. found: the start marker was there; end:
// so was a well-formed end marker. next is where command k+1 is looked for.
func section(stream []byte, pos int, nonce string, k int) (text []byte, code int, found, end bool, next int) {
	ks := strconv.Itoa(k)
	start := []byte("#gridsub-job " + nonce + " " + ks + "\n")
	i := pos
	for {
		j := bytes.Index(stream[i:], start)
		if j < 0 {
			return nil, 0, false, false, pos
		}
		j += i
		if j == 0 || stream[j-1] == '\n' {
			i = j + len(start)
			break
		}
		i = j + 1
	}
	stop := []byte("\n#gridsub-rc " + nonce + " " + ks + " ")
	j := bytes.Index(stream[i:], stop)
	if j < 0 {
		return stream[i:], 0, true, false, len(stream)
	}
	text = stream[i : i+j]
	rest := stream[i+j+len(stop):]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 {
		return text, 0, true, false, len(stream)
	}
	code, err := strconv.Atoi(string(rest[:nl]))
	if err != nil || code < 0 || code > 255 {
		return text, 0, true, false, len(stream)
	}
	return text, code, true, true, i + j + len(stop) + nl + 1
}

// Parse splits a batch's stdout and stderr into its n commands' outputs
// (n = len(Batch.Index)). It never fails: text outside the commands'
// sections (a login banner) is ignored, and a command whose stdout end
// marker is missing or malformed is not Done — its outcome is unknown, as
// is that of every command after the first one whose start marker is
// missing on stdout.
func Parse(nonce string, n int, stdout, stderr []byte) []Output {
	out := make([]Output, n)
	pos := 0
	for k := 0; k < n; k++ {
		text, code, found, end, next := section(stdout, pos, nonce, k)
		if !found {
			break
		}
		out[k].Started, out[k].Stdout = true, text
		if !end {
			break
		}
		out[k].Done, out[k].ExitCode = true, code
		pos = next
	}
	pos = 0
	for k := 0; k < n; k++ {
		text, _, found, end, next := section(stderr, pos, nonce, k)
		if !found {
			break
		}
		out[k].Stderr = text
		if !end {
			break
		}
		pos = next
	}
	return out
}

// WriteSection writes command k's section of one output stream as the
// batch's shell does: its start marker line, out verbatim, then a newline
// and its end marker with the exit status. A simulated site that runs a
// batch without a shell (Decode, then each command) writes each command's
// stdout and stderr with it, in order, and Parse reads them back.
func WriteSection(w io.Writer, nonce string, k, code int, out []byte) error {
	ks := strconv.Itoa(k)
	if _, err := io.WriteString(w, "#gridsub-job "+nonce+" "+ks+"\n"); err != nil {
		return err
	}
	if _, err := w.Write(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n#gridsub-rc "+nonce+" "+ks+" "+strconv.Itoa(code)+"\n")
	return err
}
