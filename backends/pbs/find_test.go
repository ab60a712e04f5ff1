package pbs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runFindScript runs FindArgv's script locally, its qstat a stub that
// checks it was asked for every job without ids and prints listing.
func runFindScript(t *testing.T, listing []byte, user, tag string) (string, int) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "listing"), listing, 0o644); err != nil {
		t.Fatal(err)
	}
	stub := "#!/bin/sh\n[ \"$*\" = '-x -t -f -F dsv' ] || { echo \"qstat: called with $*\" >&2; exit 2; }\ncat " + filepath.Join(dir, "listing") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "qstat"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	argv := Cmds{Bin: dir}.FindArgv(user, GridTag(tag))
	cmd := exec.Command(argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if errb.Len() > 0 && code == 0 {
		t.Errorf("find script: stderr %q", errb.String())
	}
	return out.String(), code
}

// TestFindScriptOnRealHistory: the find command asks qstat once, without
// ids (bounded at any history length), and keeps at the site exactly the
// lines of the user's jobs with the tag — on the real id-less history
// listing of the testbed (testdata/history), every job looked up by its
// own tag; a tag that is a prefix of another, another user's job with the
// tag, and an unknown tag give nothing; qstat's failure is the command's.
func TestFindScriptOnRealHistory(t *testing.T) {
	listing, err := os.ReadFile("testdata/history/qstat-x-f-dsv-no-ids.txt")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ParseDSV(listing)
	if err != nil || len(recs) < 30 {
		t.Fatalf("fixture: %d records, %v", len(recs), err)
	}
	lines := strings.SplitAfter(string(listing), "\n")
	// One job of another user, with the tag of job 0.
	other := strings.Replace(lines[1], "|Job_Owner=pbsuser@", "|Job_Owner=pbsuser2@", 1)
	other = strings.Replace(other, recs[1].Vars[TagVar]+",", recs[0].Vars[TagVar]+",", 1)
	listing = append(listing, other...)
	for i, rec := range recs {
		tag, ok := strings.CutPrefix(rec.Vars[TagVar], "g:")
		if !ok {
			t.Fatalf("record %d (%s) has no grid tag: %q", i, rec.ID, rec.Vars[TagVar])
		}
		got, code := runFindScript(t, listing, "pbsuser", tag)
		if code != 0 || got != lines[i] {
			t.Errorf("job %s by its tag %q: exit %d, got %d bytes, want its own line (%d bytes)", rec.ID, tag, code, len(got), len(lines[i]))
		}
		found, err := ParseDSV([]byte(got))
		if err != nil || len(found) != 1 || found[0].ID != rec.ID {
			t.Errorf("job %s: parsed %v %v", rec.ID, found, err)
		}
	}
	tag0, _ := strings.CutPrefix(recs[0].Vars[TagVar], "g:")
	for _, c := range []struct{ user, tag string }{
		{"pbsuser", tag0[:len(tag0)-1]}, // a prefix of job 0's tag
		{"pbsuser", "nosuch-1"},
		{"pbsuser2", tag0 + "0"},
		{"pbsuse", tag0}, // a prefix of the owner
	} {
		if got, code := runFindScript(t, listing, c.user, c.tag); got != "" || code != 0 {
			t.Errorf("user %q tag %q: exit %d, got %q, want nothing", c.user, c.tag, code, got)
		}
	}
	if got, code := runFindScript(t, listing, "pbsuser2", tag0); got != other || code != 0 {
		t.Errorf("the other user's job by its own owner: exit %d, %d bytes", code, len(got))
	}
	// qstat failing: the command fails (pipefail), nothing listed.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "qstat"), []byte("#!/bin/sh\necho 'qstat: cannot connect to server srv (errno=111)' >&2\nexit 162\n"), 0o755)
	argv := Cmds{Bin: dir}.FindArgv("pbsuser", GridTag(tag0))
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 162 || len(out) != 0 {
		t.Errorf("qstat down: %v, out %q, want exit 162 and nothing", err, out)
	}
}
