package transport

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shellArgv runs Quote(argv) through a local sh and returns the words
// printf received.
func shellArgv(t testing.TB, argv []string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "printf '%s\\0' "+Quote(argv)).Output()
	if err != nil {
		t.Fatalf("sh failed on %q: %v", Quote(argv), err)
	}
	words := strings.Split(string(out), "\x00")
	return words[:len(words)-1]
}

var quoteSeeds = [][]string{
	{"plain"},
	{""},
	{"$(touch /tmp/owned); rm -rf ~"},
	{"`id`", "$HOME", "${HOME}", "$((1+1))"},
	{"it's", `"double"`, `'`, `''`, `\`, `\'`},
	{"two\nlines", "tab\there", "cr\rhere"},
	{"*", "?", "[a]", "~", "~root", "#x", "a=b", "-n", "--", "!"},
	{"{a,b}", "a b", " ", "&", "|", ";", "<", ">", "(", ")"},
	{"ünïcödé", "\xff\xfe invalid utf-8"},
	{"sbatch", "--parsable", "--job-name=$(reboot)", "--comment=gridsub:abc-123"},
}

func TestQuoteRoundTrip(t *testing.T) {
	for _, argv := range quoteSeeds {
		if got := shellArgv(t, argv); !slices.Equal(got, argv) {
			t.Errorf("Quote(%q) = %s; sh saw %q", argv, Quote(argv), got)
		}
	}
}

func TestQuoteLeavesSafeWordsAlone(t *testing.T) {
	for in, want := range map[string]string{
		"squeue -h -t all": `squeue -h -t all`,
		"x":                `x`,
	} {
		if got := Quote(strings.Fields(in)); got != want {
			t.Errorf("Quote(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Quote([]string{"a b", "", "it's", "k=v"}); got != `'a b' '' 'it'\''s' 'k=v'` {
		t.Errorf("got %s", got)
	}
}

// FuzzQuote checks that sh splits Quote(argv) back into argv. Run with
// go test -fuzz FuzzQuote ./backends/transport/; the seeds run as a unit test.
func FuzzQuote(f *testing.F) {
	for _, s := range quoteSeeds {
		f.Add(strings.Join(s, "\x01"))
	}
	f.Fuzz(func(t *testing.T, joined string) {
		if strings.IndexByte(joined, 0) >= 0 {
			t.Skip("NUL cannot be in an argv")
		}
		argv := strings.Split(joined, "\x01")
		got := shellArgv(t, argv)
		if !slices.Equal(got, argv) {
			t.Fatalf("Quote(%q) = %s; sh saw %q", argv, Quote(argv), got)
		}
		if bytes.Contains([]byte(Quote(argv)), []byte{0}) {
			t.Fatal("NUL in output")
		}
	})
}

// TestQuoteFirstWordIsACommand: through a real /bin/sh, a first word like
// "NAME=1" or "if" names the program to run, never an assignment or a
// keyword.
func TestQuoteFirstWordIsACommand(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"NAME=1", "if", "time", "while"} {
		prog := "#!/bin/sh\nprintf 'ran %s:' \"$(basename \"$0\")\"; printf '%s|' \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(prog), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	for _, name := range []string{"NAME=1", "if", "time", "while"} {
		cmd := exec.Command("/bin/sh", "-c", Quote([]string{name, "echo", "x"}))
		cmd.Env = env
		out, err := cmd.Output()
		if want := "ran " + name + ":echo|x|"; err != nil || string(out) != want {
			t.Errorf("sh -c %s: %q %v; want %q", Quote([]string{name, "echo", "x"}), out, err, want)
		}
	}
	// Without such a program: 127, and the next word is not run.
	cmd := exec.Command("/bin/sh", "-c", Quote([]string{"NAME=1", "printenv", "NAME"}))
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 127 || len(out) != 0 {
		t.Errorf("sh -c %s: %q %v; want exit 127 and no output", Quote([]string{"NAME=1", "printenv", "NAME"}), out, err)
	}
	if got := Quote([]string{"if", "if", "a=b"}); got != `'if' if 'a=b'` {
		t.Errorf("Quote(if if a=b) = %s", got)
	}
}
