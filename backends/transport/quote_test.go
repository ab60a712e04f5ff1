package transport

import (
	"bytes"
	"os/exec"
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
