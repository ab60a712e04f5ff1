package sshbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/transport"
)

// hostile is a word no shell may expand.
const hostile = `$(touch owned) ; rm -rf ~ 'q' "d" \ * ~ # GRIDSUB_STDIN_0`

func sample() []sshbatch.Command {
	return []sshbatch.Command{
		{Argv: []string{"sh", "-c", `cat; echo "args:$#:$1"; exit 0`, "x", hostile}, Stdin: "line one\nGRIDSUB_STDIN_0\n$(touch owned)\n"},
		{Argv: []string{"sh", "-c", `echo refused >&2; exit 3`}},
		{Argv: []string{"printf", "%s", "no newline at the end"}},
	}
}

// local runs argv on this machine (exec: each word reaches the program
// literally, as the Runner contract says), in dir.
type local struct{ dir string }

func (l local) Run(ctx context.Context, argv []string, stdin io.Reader) (backends.Result, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = l.dir
	cmd.Stdin = stdin
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := backends.Result{Stdout: o.Bytes(), Stderr: e.Bytes()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.ExitCode, err = ee.ExitCode(), nil
	}
	return r, err
}

// TestBuildGolden: the script's exact form (docs/slurm.md and docs/pbs.md
// document it; simulated sites parse it) is the one in testdata.
func TestBuildGolden(t *testing.T) {
	bs, alone, err := sshbatch.Build(sample(), 0, 0)
	if err != nil || len(bs) != 1 || len(alone) != 0 {
		t.Fatalf("Build: %d batches, alone %v, %v", len(bs), alone, err)
	}
	b := bs[0]
	if b.Argv[0] != sshbatch.Shell || b.Argv[1] != "-c" || b.Argv[3] != sshbatch.Program || !reflect.DeepEqual(b.Index, []int{0, 1, 2}) {
		t.Errorf("argv/index: %q %v", b.Argv, b.Index)
	}
	golden := filepath.Join("testdata", "sample.sh")
	if os.Getenv("GRIDSUB_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(b.Script()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.Script() != string(want) {
		t.Errorf("script differs from %s (GRIDSUB_UPDATE_GOLDEN=1 rewrites it):\n%s", golden, b.Script())
	}
}

// TestBatchRunsInRealShell runs a batch through /bin/sh as the login
// node would (the whole argv quoted into one command line for `sh -c`, as
// sshd does) and reads every command's outcome back: stdin verbatim
// (including a line that looks like the first delimiter), hostile words
// literal, exit statuses, stderr per command, output without a final
// newline.
func TestBatchRunsInRealShell(t *testing.T) {
	dir := t.TempDir()
	bs, _, err := sshbatch.Build(sample(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// As sshd: the login shell gets the quoted line as one word.
	line := transport.Quote(bs[0].Argv)
	r, err := local{dir}.Run(context.Background(), []string{"bash", "-c", line}, nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("batch: %v exit %d: %s", err, r.ExitCode, r.Stderr)
	}
	outs := sshbatch.Parse(bs[0].Nonce, 3, r.Stdout, r.Stderr)
	want := []sshbatch.Output{
		{Started: true, Done: true, ExitCode: 0, Stdout: []byte("line one\nGRIDSUB_STDIN_0\n$(touch owned)\nargs:1:" + hostile + "\n"), Stderr: []byte{}},
		{Started: true, Done: true, ExitCode: 3, Stdout: []byte{}, Stderr: []byte("refused\n")},
		{Started: true, Done: true, ExitCode: 0, Stdout: []byte("no newline at the end"), Stderr: []byte{}},
	}
	for k := range want {
		if !reflect.DeepEqual(outs[k], want[k]) {
			t.Errorf("command %d:\n got %+v %q %q\nwant %+v %q %q", k, outs[k], outs[k].Stdout, outs[k].Stderr, want[k], want[k].Stdout, want[k].Stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "owned")); err == nil {
		t.Error("a hostile word was run by the shell")
	}
}

// TestBatchStopsWhenOutputIsGone: the shell submits nothing more once its
// stdout cannot be written (the session is gone): a start marker that
// cannot be written ends the batch.
func TestBatchStopsWhenOutputIsGone(t *testing.T) {
	dir := t.TempDir()
	cmds := []sshbatch.Command{
		{Argv: []string{"touch", "first"}},
		{Argv: []string{"sh", "-c", "exec >&-; exec 2>&-; sleep 0"}},
		{Argv: []string{"touch", "second"}},
	}
	bs, _, err := sshbatch.Build(cmds, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// stdout is a closed pipe: every write fails (SIGPIPE ignored here,
	// so the shell sees EPIPE, the harder case).
	pr, pw, _ := os.Pipe()
	pr.Close()
	cmd := exec.Command("bash", "-c", "trap '' PIPE; "+transport.Quote(bs[0].Argv))
	cmd.Dir, cmd.Stdout = dir, pw
	_ = cmd.Run()
	pw.Close()
	for _, f := range []string{"first", "second"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s was created although the batch's output was gone", f)
		}
	}
}

func TestBuildSplitsAndBounds(t *testing.T) {
	var cmds []sshbatch.Command
	for i := 0; i < 40; i++ {
		cmds = append(cmds, sshbatch.Command{Argv: []string{"echo", fmt.Sprint(i), "it's"}, Stdin: strings.Repeat("x'y\n", i*10+1)})
	}
	huge := sshbatch.Command{Argv: []string{"cat"}, Stdin: strings.Repeat("z", 5000) + "\n"}
	cmds = append(cmds[:20], append([]sshbatch.Command{huge}, cmds[20:]...)...)
	const max = 4000
	bs, alone, err := sshbatch.Build(cmds, max, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(alone, []int{20}) {
		t.Errorf("alone = %v, want [20] (the one command over the bound)", alone)
	}
	var seen []int
	for _, b := range bs {
		if n := len(transport.Quote(b.Argv)); n > max {
			t.Errorf("batch %v: quoted command line is %d bytes, over %d", b.Index, n, max)
		}
		if len(b.Index) > 7 {
			t.Errorf("batch %v: more than 7 commands", b.Index)
		}
		_, got, err := sshbatch.Decode(b.Script())
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		for k, i := range b.Index {
			if !reflect.DeepEqual(got[k], cmds[i]) {
				t.Errorf("batch command %d is not command %d", k, i)
			}
		}
		seen = append(seen, b.Index...)
	}
	var want []int
	for i := range cmds {
		if i != 20 {
			want = append(want, i)
		}
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("batched %v, want every command but 20 once, in order", seen)
	}
	// The default bound is under Linux's 128 KiB per argument.
	if sshbatch.DefaultMaxBytes >= 128<<10 {
		t.Errorf("DefaultMaxBytes %d is not below MAX_ARG_STRLEN", sshbatch.DefaultMaxBytes)
	}
}

func TestBuildRefuses(t *testing.T) {
	for name, c := range map[string]sshbatch.Command{
		"empty argv":     {},
		"NUL in argv":    {Argv: []string{"a\x00b"}},
		"newline in arg": {Argv: []string{"echo", "a\nb"}},
		"NUL in stdin":   {Argv: []string{"cat"}, Stdin: "a\x00\n"},
		"no final \\n":   {Argv: []string{"cat"}, Stdin: "abc"},
	} {
		_, _, err := sshbatch.Build([]sshbatch.Command{{Argv: []string{"true"}}, c}, 0, 0)
		if !errors.Is(err, sshbatch.ErrCommand) || !strings.Contains(err.Error(), "command 1") {
			t.Errorf("%s: %v, want ErrCommand naming command 1", name, err)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	bs, _, err := sshbatch.Build(sample(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := bs[0].Script()
	for name, bad := range map[string]string{
		"empty":          "",
		"no header":      strings.SplitN(s, "\n", 2)[1],
		"extra line":     s + "rm -rf ~\n",
		"unquoted $":     strings.Replace(s, "sh -c 'echo", "sh $HOME 'echo", 1),
		"no heredoc end": strings.Replace(s, "\nGRIDSUB_STDIN_0_1\n", "\n", 1),
		"marker changed": strings.Replace(s, "#gridsub-job", "#gridsub-jab", 1),
		"one missing":    strings.Replace(s, " v1 "+bs[0].Nonce+" 3", " v1 "+bs[0].Nonce+" 4", 1),
	} {
		if _, _, err := sshbatch.Decode(bad); !errors.Is(err, sshbatch.ErrScript) || !strings.Contains(err.Error(), "line") {
			t.Errorf("%s: %v, want ErrScript naming a line", name, err)
		}
	}
}

func TestUnquoteInvertsQuote(t *testing.T) {
	for _, argv := range [][]string{
		{"if", "", "a b", "it's", `'\''`, hostile, "=x", "-x=1", "ünïcode"},
		{"plain"},
	} {
		got, err := sshbatch.Unquote(transport.Quote(argv))
		if err != nil || !reflect.DeepEqual(got, argv) {
			t.Errorf("Unquote(Quote(%q)) = %q, %v", argv, got, err)
		}
	}
	for _, bad := range []string{"", "a  b", "a ", "'open", "a$b", `a\b`, "a;b"} {
		if _, err := sshbatch.Unquote(bad); err == nil {
			t.Errorf("Unquote(%q) accepted", bad)
		}
	}
}
