package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gridsub/gridsub/bridge"
)

// exitInterrupted is the exit status when Ctrl-C stops a command that
// follows a daemon's job (--wait, watch, logs -f): the shell's 128+SIGINT.
// The job itself goes on in the daemon.
const exitInterrupted = 130

// buildInfo is what `gridsub version` reports.
type buildInfo struct {
	Version  string `json:"version"`  // the module version, "(devel)" for a build from a checkout
	Commit   string `json:"commit"`   // vcs.revision, or "devel" when the build has none
	Modified bool   `json:"modified"` // the checkout had uncommitted changes
	Time     string `json:"commit_time,omitempty"`
	Go       string `json:"go"`
}

// commit is the commit a build names with -ldflags "-X main.commit=<rev>",
// for builds where Go records no VCS stamp (a git worktree, a source
// tarball); the stamp wins when there is one.
var commit string

// readBuildInfo reads the build's module version and VCS stamp
// (runtime/debug.ReadBuildInfo: vcs.revision, recorded by go build and go
// install in a git checkout); a binary built without one (go test,
// -buildvcs=false, a worktree) has the commit of -X main.commit, else
// "devel".
func readBuildInfo() buildInfo {
	bi := buildInfo{Version: "(devel)", Commit: "devel", Go: runtime.Version()}
	if commit != "" {
		bi.Commit = commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	if v := info.Main.Version; v != "" {
		bi.Version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.Commit = s.Value
		case "vcs.modified":
			bi.Modified = s.Value == "true"
		case "vcs.time":
			bi.Time = s.Value
		}
	}
	return bi
}

// String is the one-line form of --version and `gridsub version`.
func (b buildInfo) String() string {
	c := b.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if b.Modified {
		c += "+modified"
	}
	return fmt.Sprintf("gridsub %s (commit %s, %s)", b.Version, c, b.Go)
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gridsub's version and the commit it was built from",
		Long: `Version prints the module version, the commit the binary was built from
(with "+modified" when the checkout had uncommitted changes; "devel" when the
build carries no commit, e.g. a test binary) and the Go version. --output json
gives the same as an object. "gridsub --version" prints the same line.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bi := readBuildInfo()
			if g.json() {
				return writeJSON(g.stdout, bi)
			}
			fmt.Fprintln(g.stdout, bi.String())
			return nil
		},
	}
}

// notAJobFile explains why a word given to the root command is not run as
// a job file: it names no existing file. A word close to a command gets a
// did-you-mean; a path-like word is a missing job file.
func notAJobFile(root *cobra.Command, word string) error {
	if eq, ok := batchVerbs[word]; ok {
		// A batch system's command that this gridsub has no front-end for.
		return fmt.Errorf("%s is a SLURM/PBS command, and this gridsub has no `gridsub %s` front-end; %s", word, word, eq)
	}
	if s := suggest(root, word); len(s) > 0 {
		return fmt.Errorf("unknown command '%s'; did you mean '%s'? (see gridsub --help)", word, strings.Join(s, "' or '"))
	}
	if strings.ContainsRune(word, filepath.Separator) || strings.ContainsRune(word, '.') {
		return fmt.Errorf("job file %s: no such file", word)
	}
	return fmt.Errorf("unknown command '%s', and no job file of that name (see gridsub --help)", word)
}

// batchVerbs are the SLURM and PBS commands people type out of habit that
// gridsub has no front-end for, with what does their work in gridsub
// (sbatch, squeue, sacct, scancel, scontrol, qsub, qstat and qdel are
// front-ends: commands of their own, fe_*.go).
var batchVerbs = map[string]string{
	"srun":     "run a job and see its output with `gridsub JOB.yaml` (it waits for the end)",
	"salloc":   "gridsub allocates no interactive nodes; run a job with `gridsub JOB.yaml`",
	"sinfo":    "show the sites with `gridsub sites`",
	"pbsnodes": "show the sites with `gridsub sites`",
}

// suggest returns the commands closest to word: those it is a prefix of,
// else those at the smallest edit distance (a swap of two neighbouring
// letters counts one), if that is at most 2.
func suggest(root *cobra.Command, word string) []string {
	w := strings.ToLower(word)
	var prefixed, near []string
	best := 3
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		for _, name := range append([]string{c.Name()}, c.Aliases...) {
			if len(w) >= 2 && strings.HasPrefix(name, w) {
				prefixed = append(prefixed, c.Name())
				continue
			}
			switch d := editDistance(w, name); {
			case d < best:
				best, near = d, []string{c.Name()}
			case d == best:
				near = append(near, c.Name())
			}
		}
	}
	if len(prefixed) > 0 {
		return prefixed
	}
	return near
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of neighbours cost one each.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// isFile reports whether path names something that exists (a job file to
// run); a word that does not is never read as one.
func isFile(path string) bool {
	_, err := os.Stat(path)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// usageArgs makes every command's argument errors (a missing or extra
// argument) usage errors, exit status 2, and the same for flag errors.
func usageArgs(c *cobra.Command) {
	if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				if len(args) > 0 && cmd.HasSubCommands() {
					if s := suggest(cmd, args[0]); len(s) > 0 {
						return usageErr(fmt.Errorf("unknown command '%s' of %s; did you mean '%s'?", args[0], cmd.CommandPath(), strings.Join(s, "' or '")))
					}
				}
				return usageErr(fmt.Errorf("%s: %w (see gridsub %s --help)", cmd.CommandPath(), err, strings.TrimPrefix(cmd.CommandPath(), "gridsub ")))
			}
			return nil
		}
	}
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if !cmd.HasParent() {
			return usageErr(err) // "gridsub: unknown flag", not "gridsub: gridsub: ..."
		}
		return usageErr(fmt.Errorf("%s: %w", strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), err))
	})
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// completeJobFiles completes the root's argument: the subcommands (cobra
// adds them) and job files (*.yaml, *.yml) for the shell to list.
func completeJobFiles(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return []cobra.Completion{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

// completeStates completes --state with bridge.States.
func completeStates(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	// The value may be a comma-separated list: complete its last item.
	head, last := "", prefix
	if i := strings.LastIndexByte(prefix, ','); i >= 0 {
		head, last = prefix[:i+1], prefix[i+1:]
	}
	var out []cobra.Completion
	for _, s := range bridge.States {
		if strings.HasPrefix(string(s), last) {
			out = append(out, head+string(s))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// stamp formats a broker time for people: local wall time, or the
// simulated clock's time marked "(sim)" when the broker runs simulated
// sites (its clock runs ahead of the wall clock, and it is no wall time).
func stamp(t time.Time, sim bool) string {
	if t.IsZero() {
		return "-"
	}
	if sim {
		return t.UTC().Format(time.DateTime) + " (sim)"
	}
	return t.Local().Format(time.DateTime)
}
