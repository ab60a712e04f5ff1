package jobrules

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRules(t *testing.T) {
	submit := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", MaxEnvValue+1)
	cases := []struct {
		name string
		err  error
		want error  // sentinel; nil = valid
		msg  string // part of the message
	}{
		{"name ok", Name("hello-1.x_y"), nil, ""},
		{"name empty", Name(""), ErrValue, "1-64 characters"},
		{"name 65", Name(strings.Repeat("a", 65)), ErrValue, "1-64"},
		{"name leading dot", Name(".x"), ErrValue, "starting with a letter or digit"},
		{"name slash", Name("a/b"), ErrValue, `"a/b"`},
		{"name shell", Name("a;rm"), ErrValue, ""},
		{"env ok", EnvName("OMP_NUM_THREADS"), nil, ""},
		{"env underscore", EnvName("_x1"), nil, ""},
		{"env digit first", EnvName("1X"), ErrValue, "not a valid environment variable name"},
		{"env metachar", EnvName("X;touch /tmp/p"), ErrValue, "not a valid environment variable name"},
		{"env dollar", EnvName("$(id)"), ErrValue, "not a valid"},
		{"env empty", EnvName(""), ErrValue, "not a valid"},
		{"env SLURM", EnvName("SLURM_X"), ErrValue, "reserved"},
		{"env PBS", EnvName("PBS_O_WORKDIR"), ErrValue, "reserved"},
		{"env SBATCH", EnvName("SBATCH_PARTITION"), ErrValue, "reserved"},
		{"env GRIDSUB", EnvName("GRIDSUB_JOB_ID"), ErrValue, "reserved"},
		{"env wrapper var", EnvName("gridsub_rc"), ErrValue, "reserved"},
		{"env value NUL", EnvValue("a\x00b"), ErrValue, "NUL"},
		{"env value long", EnvValue(long), ErrValue, "at most 65536"},
		{"env value shell", EnvValue("$(touch /tmp/pwned); `id`"), nil, ""},
		{"word NUL", Word("a\x00"), ErrValue, "NUL"},
		{"script blank", Script(" \n"), ErrValue, "empty"},
		{"script NUL", Script("echo\x00"), ErrValue, "NUL"},
		{"script long", Script(strings.Repeat("e", MaxScript+1)), ErrValue, "at most"},
		{"nodes 0", Count(0, 1, MaxNodes, "a whole number >= 1"), ErrValue, "got 0"},
		{"nodes 2^40", Count(1<<40, 1, MaxNodes, "x"), ErrValue, "got 1099511627776"},
		{"nodes max", Count(MaxNodes, 1, MaxNodes, "x"), nil, ""},
		{"walltime 0", Walltime(0), ErrValue, "must be > 0"},
		{"walltime negative", Walltime(-time.Second), ErrValue, "> 0"},
		{"walltime max int", Walltime(math.MaxInt64), ErrValue, "at most 8760h0m0s"},
		{"walltime year", Walltime(MaxWalltime), nil, ""},
		{"data negative", DataSize(-1), ErrValue, "got -1"},
		{"data 9EiB", DataSize(math.MaxInt64), ErrValue, "64 TiB"},
		{"data PiB", DataSize(MaxDataSize), nil, ""},
		{"qos empty", QoS(""), nil, ""},
		{"qos high", QoS("high"), nil, ""},
		{"qos unknown", QoS("platinum"), ErrValue, `must be one of auto, high, low, none, got "platinum"`},
		{"time year 1", Time(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), submit), ErrValue, "0001-01-01T00:00:00Z is before the submission"},
		{"time skew ok", Time(submit.Add(-ClockSkew), submit), nil, ""},
		{"time too early", Time(submit.Add(-ClockSkew-time.Second), submit), ErrValue, "before the submission"},
		{"time far", Time(submit.Add(MaxHorizon+time.Second), submit), ErrValue, "more than 10 years"},
		{"time max", Time(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), submit), ErrValue, "more than 10 years"},
		{"offset far", Offset(MaxHorizon + 1), ErrValue, "more than 10 years"},
		{"benefit NaN", Benefit(math.NaN(), 0, true), ErrValue, "NaN"},
		{"benefit Inf", Benefit(math.Inf(1), 0, true), ErrValue, "+Inf"},
		{"benefit huge", Benefit(1e300, 0, true), ErrValue, "at most 1e+15"},
		{"benefit zero open", Benefit(0, 0, true), ErrValue, "> 0"},
		{"benefit zero closed", Benefit(0, 0, false), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == nil {
				if c.err != nil {
					t.Fatalf("want valid, got %v", c.err)
				}
				return
			}
			if !errors.Is(c.err, c.want) {
				t.Fatalf("got %v, want %v", c.err, c.want)
			}
			if !strings.Contains(c.err.Error(), c.msg) {
				t.Fatalf("message %q lacks %q", c.err, c.msg)
			}
		})
	}
}

func TestRelPath(t *testing.T) {
	cases := []struct {
		in       string
		allowDot bool
		want     string
		err      error
	}{
		{"out.txt", false, "out.txt", nil},
		{"a/./b/../c", false, "a/c", nil},
		{"results/", false, "results/", nil},
		{".", true, ".", nil},
		{".", false, "", ErrValue},
		{"", false, "", ErrValue},
		{"/etc/passwd", false, "", ErrPath},
		{"~/.ssh/id_rsa", false, "", ErrPath},
		{`\\server\share`, false, "", ErrPath},
		{"C:/x", false, "", ErrPath},
		{"..", false, "", ErrPath},
		{"../x", false, "", ErrPath},
		{"a/../../x", false, "", ErrPath},
		{`a\..\..\x`, false, "", ErrPath},
		{"a\x00b", false, "", ErrValue},
		{strings.Repeat("a/", MaxPathLen), false, "", ErrValue},
	}
	for _, c := range cases {
		got, err := RelPath(c.in, c.allowDot)
		if c.err == nil && (err != nil || got != c.want) || c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("RelPath(%q, %v) = %q, %v; want %q, %v", c.in, c.allowDot, got, err, c.want, c.err)
		}
	}
}

// TestConfine: paths are resolved with their symbolic links before the
// containment check, a dangling link is refused, and nothing hidden below
// a root is allowed.
func TestConfine(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "data"), filepath.Join(root, ".ssh")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "data", "in.dat"))
	write(filepath.Join(outside, "secret"))
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(outside, "escape")                         // a directory link out of the root
	link(filepath.Join(outside, "secret"), "s.txt") // a file link out of the root
	link(filepath.Join(root, "data"), "inner")      // a link that stays inside
	link(filepath.Join(outside, "missing"), "dangling")
	roots := []string{root}

	cases := []struct {
		p    string
		want string // resolved; "" = refused
		err  error
		msg  string
	}{
		{filepath.Join(root, "data", "in.dat"), filepath.Join(root, "data", "in.dat"), nil, ""},
		{filepath.Join(root, "new", "g000001"), filepath.Join(root, "new", "g000001"), nil, ""},
		{filepath.Join(root, "inner", "in.dat"), filepath.Join(root, "data", "in.dat"), nil, ""},
		{root, root, nil, ""},
		{filepath.Join(outside, "secret"), "", ErrOutsideRoot, "is outside the roots"},
		{filepath.Join(root, "..", "outside", "secret"), "", ErrOutsideRoot, "outside"},
		{filepath.Join(root, "escape", "secret"), "", ErrOutsideRoot, "with symbolic links resolved"},
		{filepath.Join(root, "escape", "newdir", "{id}"), "", ErrOutsideRoot, "outside"},
		{filepath.Join(root, "s.txt"), "", ErrOutsideRoot, "outside"},
		{filepath.Join(root, "dangling", "x"), "", ErrOutsideRoot, "missing target"},
		{filepath.Join(root, ".ssh"), "", ErrOutsideRoot, `hidden ".ssh"`},
		{filepath.Join(root, ".ssh", "authorized_keys"), "", ErrOutsideRoot, "hidden"},
		{filepath.Join(root, "data", ".bashrc"), "", ErrOutsideRoot, "hidden"},
		{"/etc/shadow", "", ErrOutsideRoot, "outside"},
		{"relative/path", "", ErrValue, "absolute"},
		{root + "\x00x", "", ErrValue, "NUL"},
	}
	for _, c := range cases {
		got, err := Confine(c.p, roots, "the roots")
		if c.want != "" {
			if err != nil || got != c.want {
				t.Errorf("Confine(%q) = %q, %v; want %q", c.p, got, err, c.want)
			}
			continue
		}
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Confine(%q) = %q, %v; want %v containing %q", c.p, got, err, c.err, c.msg)
		}
	}
	if _, err := Confine(filepath.Join(root, "x"), nil, "the output root"); !errors.Is(err, ErrOutsideRoot) || !strings.Contains(err.Error(), "the output root: none configured") {
		t.Errorf("no roots: %v", err)
	}
	// A root that is itself a link is resolved like the paths.
	if err := os.Symlink(root, filepath.Join(base, "rootlink")); err != nil {
		t.Fatal(err)
	}
	rr, err := ResolveRoots([]string{filepath.Join(base, "rootlink")})
	if err != nil || rr[0] != root {
		t.Fatalf("ResolveRoots = %v, %v; want [%s]", rr, err, root)
	}
	if got, err := Confine(filepath.Join(base, "rootlink", "data", "in.dat"), rr, "r"); err != nil || got != filepath.Join(root, "data", "in.dat") {
		t.Errorf("through the root's link: %q, %v", got, err)
	}
}
