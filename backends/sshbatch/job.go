package sshbatch

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gridsub/gridsub/backends"
)

// Files the wrapper writes in the job directory, the same under every
// dialect.
const (
	ExitFile   = ".gridsub-exit"     // the exit code, written atomically at the end
	StdoutFile = backends.StdoutFile // the job's standard output (the same name on every backend)
	StderrFile = backends.StderrFile // the job's standard error
	ScriptFile = ".gridsub-job.sh"   // the wrapper itself
	userScript = ".gridsub-user.sh"
	setupFile  = ".gridsub-setup.sh" // JobSpec.Setup, sourced before the command
)

// setupRun runs the setup file ($1) and then the command (the rest of the
// words) in one child bash: what the setup changes (module load, exported
// variables, the directory) holds for the command, and an exit in the
// setup ends the child, not the wrapper, which still records the code. A
// setup that fails ends the job with 125 before the command runs.
const setupRun = `. "$1" || { s=$?; echo "gridsub: setup failed (exit $s)" >&2; exit 125; }; shift; exec "$@"`

// JobDir is the job's directory relative to the backend's remote directory:
// gridsub/<grid id> for a single-site job, gridsub/<grid id>-<k> for
// component k of a co-allocated one.
func JobDir(spec *backends.JobSpec) string {
	if spec.Components > 1 {
		return fmt.Sprintf("gridsub/%s-%d", spec.GridID, spec.Component)
	}
	return "gridsub/" + spec.GridID
}

// DirBelongs reports whether a job directory (absolute, or relative to the
// remote directory) is one of gridID's: .../gridsub/<gridID> or
// .../gridsub/<gridID>-<k>.
func DirBelongs(dir, gridID string) bool {
	i := strings.LastIndex(dir, "/gridsub/")
	if i < 0 {
		if !strings.HasPrefix(dir, "gridsub/") {
			return false
		}
		i = -1
	}
	base := dir[i+len("/gridsub/"):]
	if base == gridID {
		return true
	}
	k, ok := strings.CutPrefix(base, gridID+"-")
	return ok && k != "" && strings.Trim(k, "0123456789") == ""
}

// ShellQuote quotes one word for bash: it comes back literally. A word it
// leaves bare may still mean something in command position (NAME=1 is an
// assignment, "if" a keyword): a command name is always quoted.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%") == "" {
		return s
	}
	return commandWord(s)
}

// commandWord quotes the first word of a command line always, so that bash
// runs a program of that name: quoted, "NAME=1" is not an assignment (which
// would run the next word as the command, with NAME set) and "if", "time"
// or "{" are not keywords.
func commandWord(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// heredocDelim picks a here-document delimiter that is no line of body.
func heredocDelim(body string) string {
	d := "GRIDSUB_USER_SCRIPT_END"
	for i := 0; ; i++ {
		cand := d
		if i > 0 {
			cand = fmt.Sprintf("%s_%d", d, i)
		}
		clash := false
		for _, l := range strings.Split(body, "\n") {
			if l == cand {
				clash = true
				break
			}
		}
		if !clash {
			return cand
		}
	}
}

// Wrapper renders the job script. It runs prologue (lines a batch system
// needs first, such as entering the directory the job was submitted from;
// "" for none), then in the job directory exports spec.Env, changes to
// WorkDir, runs the command (each argv word quoted, so nothing in it is
// expanded) or the script (written verbatim to .gridsub-user.sh through a
// quoted here-document), and records the exit code in .gridsub-exit by
// writing a temporary file and renaming it, so a reader sees the whole
// code or no file.
func Wrapper(spec *backends.JobSpec, prologue string) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	b.WriteString(prologue)
	fmt.Fprintf(&b, "# gridsub job wrapper: grid job %s, component %d of %d\n", spec.GridID, spec.Component, max(spec.Components, 1))
	b.WriteString("gridsub_dir=$PWD\n")
	b.WriteString("rm -f -- \"$gridsub_dir/" + ExitFile + "\"\n")
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, ShellQuote(spec.Env[k]))
	}
	fmt.Fprintf(&b, "export GRIDSUB_GRID_ID=%s GRIDSUB_JOB_DIR=\"$gridsub_dir\"\n", ShellQuote(spec.GridID))
	hereDoc := func(file, text string) {
		d := heredocDelim(text)
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		fmt.Fprintf(&b, "cat > %s <<'%s'\n%s%s\n", file, d, text, d)
	}
	if spec.Script != "" {
		hereDoc(userScript, spec.Script)
	}
	if spec.Setup != "" {
		hereDoc(setupFile, spec.Setup)
	}
	if spec.WorkDir != "" {
		wd, _ := RelPath("work dir", spec.WorkDir)
		fmt.Fprintf(&b, "mkdir -p -- %s && cd -- %s || { echo 'gridsub: cannot enter work dir' >&2; gridsub_rc=126; }\n", ShellQuote(wd), ShellQuote(wd))
	}
	b.WriteString("if [ -z \"${gridsub_rc:-}\" ]; then\n  ")
	if spec.Setup != "" {
		b.WriteString("bash -c " + ShellQuote(setupRun) + " gridsub-setup \"$gridsub_dir/" + setupFile + "\" ")
	}
	if spec.Script != "" {
		b.WriteString("bash \"$gridsub_dir/" + userScript + "\"")
	} else {
		q := make([]string, len(spec.Command))
		for i, w := range spec.Command {
			q[i] = ShellQuote(w)
		}
		if len(q) > 0 && spec.Setup == "" { // after the setup, exec "$@" takes the words as they are
			q[0] = commandWord(spec.Command[0])
		}
		b.WriteString(strings.Join(q, " "))
	}
	b.WriteString(" </dev/null\n  gridsub_rc=$?\nfi\n")
	b.WriteString("printf '%d\\n' \"$gridsub_rc\" > \"$gridsub_dir/" + ExitFile + ".tmp.$$\" && mv -f -- \"$gridsub_dir/" + ExitFile + ".tmp.$$\" \"$gridsub_dir/" + ExitFile + "\"\n")
	b.WriteString("exit \"$gridsub_rc\"\n")
	return b.String()
}
