package sshbatch_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

const nonce = "0123456789abcdef"

func read(t *testing.T, name string) []byte {
	t.Helper()
	if name == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// o is an Output in short: started, done, exit code, stdout, stderr.
func o(started, done bool, code int, stdout, stderr string) sshbatch.Output {
	out := sshbatch.Output{Started: started, Done: done, ExitCode: code}
	if started {
		out.Stdout = []byte(stdout)
	}
	if stderr != "" || started {
		out.Stderr = []byte(stderr)
	}
	return out
}

// TestParseFixtures parses every output fixture of testdata with the
// expected result.
func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		stdout, stderr string
		n              int
		want           []sshbatch.Output
	}{
		{"full.stdout", "full.stderr", 3, []sshbatch.Output{
			o(true, true, 0, "1001\n", ""),
			o(true, true, 1, "", "sbatch: error: Batch job submission failed: Invalid partition name specified\n"),
			o(true, true, 0, "1003;cluster\n", ""),
		}},
		// A login banner before the first marker is ignored; the cut
		// command is started, not done; the one after never started.
		{"cut.stdout", "cut.stderr", 3, []sshbatch.Output{
			o(true, true, 0, "1001\n", ""),
			o(true, false, 0, "", ""),
			{},
		}},
		// A malformed exit status is not an exit status: unknown outcome,
		// and nothing after it is trusted.
		{"badrc.stdout", "", 2, []sshbatch.Output{{Started: true, Stdout: []byte("1001\n")}, {}}},
		// Sections out of order: command 0 is found after command 1's
		// section and that is all (command 1's comes before it).
		{"order.stdout", "", 2, []sshbatch.Output{{Started: true, Done: true, Stdout: []byte("1001\n")}, {}}},
		// A marker not at the start of a line, or with another nonce, is
		// not a marker.
		{"forged.stdout", "", 2, []sshbatch.Output{{}, {}}},
		{"nonl.stdout", "", 1, []sshbatch.Output{{Started: true, Stdout: []byte("1001")}}},
	} {
		got := sshbatch.Parse(nonce, tc.n, read(t, tc.stdout), read(t, tc.stderr))
		for k := range tc.want {
			g, w := got[k], tc.want[k]
			if g.Started != w.Started || g.Done != w.Done || g.ExitCode != w.ExitCode ||
				string(g.Stdout) != string(w.Stdout) || string(g.Stderr) != string(w.Stderr) {
				t.Errorf("%s command %d:\n got %+v %q %q\nwant %+v %q %q", tc.stdout, k, g, g.Stdout, g.Stderr, w, w.Stdout, w.Stderr)
			}
		}
	}
}

func TestFate(t *testing.T) {
	cut := errors.New("connection lost")
	notSent := errors.Join(transport.ErrNotSent, backends.ErrUnavailable)
	for _, tc := range []struct {
		o    sshbatch.Output
		err  error
		want sshbatch.Fate
	}{
		{sshbatch.Output{Started: true, Done: true}, nil, sshbatch.Ran},
		{sshbatch.Output{Started: true, Done: true}, cut, sshbatch.Ran},
		{sshbatch.Output{}, nil, sshbatch.NotRun},
		{sshbatch.Output{}, notSent, sshbatch.NotRun},
		{sshbatch.Output{}, cut, sshbatch.Unknown},
		{sshbatch.Output{Started: true}, nil, sshbatch.Unknown},
		{sshbatch.Output{Started: true}, cut, sshbatch.Unknown},
	} {
		if got := tc.o.Fate(tc.err); got != tc.want {
			t.Errorf("%+v with %v: %s, want %s", tc.o, tc.err, got, tc.want)
		}
	}
}

// FuzzBuildDecode: whatever the words and stdin, a command that Check
// accepts survives Build → Decode unchanged, and the quoted command line
// stays within the bound.
func FuzzBuildDecode(f *testing.F) {
	f.Add("sh", hostile, "GRIDSUB_STDIN_0\nx\n", "it's", "")
	f.Add("", "", "", "", "a\n")
	f.Add("a b", "'\\''", "\n", "GRIDSUB_STDIN_1", "GRIDSUB_STDIN_1\nGRIDSUB_STDIN_1_1\n")
	f.Fuzz(func(t *testing.T, w0, w1, in0, w2, in1 string) {
		cmds := []sshbatch.Command{{Argv: []string{w0, w1}, Stdin: in0}, {Argv: []string{w2}, Stdin: in1}}
		for _, c := range cmds {
			if c.Check() != nil {
				return
			}
		}
		bs, alone, err := sshbatch.Build(cmds, 0, 0)
		if err != nil {
			t.Fatalf("Build of checked commands: %v", err)
		}
		var got []sshbatch.Command
		for _, b := range bs {
			if n := len(transport.Quote(b.Argv)); n > sshbatch.DefaultMaxBytes {
				t.Fatalf("quoted batch of %d bytes", n)
			}
			_, cs, err := sshbatch.Decode(b.Script())
			if err != nil {
				t.Fatalf("Decode(Build(...)): %v\n%s", err, b.Script())
			}
			got = append(got, cs...)
		}
		var want []sshbatch.Command
		for i, c := range cmds {
			if !contains(alone, i) {
				want = append(want, c)
			}
		}
		if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("Decode(Build(%q)) = %q", want, got)
		}
	})
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// FuzzParse: any output parses without panicking, and the invariants
// hold: Done implies Started, and after the first command not Done no
// command has started.
func FuzzParse(f *testing.F) {
	for _, n := range []string{"full", "cut", "badrc", "order", "forged", "nonl"} {
		so, _ := os.ReadFile(filepath.Join("testdata", n+".stdout"))
		se, _ := os.ReadFile(filepath.Join("testdata", n+".stderr"))
		f.Add(so, se, 3)
	}
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		outs := sshbatch.Parse(nonce, n, stdout, stderr)
		if len(outs) != n {
			t.Fatalf("%d outputs for %d commands", len(outs), n)
		}
		stopped := false
		for k, o := range outs {
			if o.Done && !o.Started {
				t.Fatalf("command %d done but not started", k)
			}
			if stopped && o.Started {
				t.Fatalf("command %d started after one that did not end", k)
			}
			if !o.Done {
				stopped = true
			}
			if o.Done && (o.ExitCode < 0 || o.ExitCode > 255) {
				t.Fatalf("exit code %d", o.ExitCode)
			}
			if strings.Contains(string(o.Stdout), "\n#gridsub-rc "+nonce+" "+strconv.Itoa(k)+" ") && o.Done {
				t.Fatalf("command %d's stdout holds its own end marker", k)
			}
		}
	})
}
