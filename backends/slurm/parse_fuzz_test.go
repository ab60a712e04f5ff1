package slurm

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
)

// Native fuzz targets of the parsers of SLURM's output: the output comes
// from the site and is not trusted. Each target is seeded with every
// captured output in testdata/ (stdout and stderr); scripts/fuzz.sh runs
// each for a bounded time. Every parser must give an error wrapping
// ErrBadOutput (never a panic, never a zero-value success) on garbage, and
// what it does accept must make sense.

// addCaptures adds every captured output (stdout and stderr) as a seed.
func addCaptures(f *testing.F) {
	f.Helper()
	sshbatchtest.SeedFiles(f, 20, "testdata/*.out", "testdata/*.err")
}

// maxErrLen bounds an error's text: badOutput quotes at most 2000 bytes of
// the raw output (%q writes a byte as at most 4 characters, a rune as 10).
const maxErrLen = 2000*10 + 1000

// checkBad holds a parse error to the contract: ErrBadOutput, bounded text.
func checkBad(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, backends.ErrBadOutput) {
		t.Fatalf("%s: error %v does not wrap ErrBadOutput", what, err)
	}
	if n := len(err.Error()); n > maxErrLen {
		t.Fatalf("%s: error text of %d bytes: the raw output must be cut", what, n)
	}
}

// nonBlankLines counts the lines lines() keeps.
func nonBlankLines(out []byte) int { return len(lines(out)) }

func checkStatus(t *testing.T, what string, s backends.JobStatus) {
	t.Helper()
	if !validJobID(string(s.ID)) {
		t.Errorf("%s: job id %q accepted", what, s.ID)
	}
	if s.State <= backends.StateUnknown || s.State >= backends.StateLost {
		t.Errorf("%s: job %s in state %q accepted", what, s.ID, s.State)
	}
	if s.ExitCode != -1 && !s.State.Final() {
		t.Errorf("%s: job %s in state %s has exit code %d", what, s.ID, s.State, s.ExitCode)
	}
	if s.ExitCode != -1 && (s.ExitCode < 0 || s.ExitCode > 255 || s.Signal < 0 || s.Signal > 127) {
		t.Errorf("%s: job %s exit code %d, signal %d: out of range", what, s.ID, s.ExitCode, s.Signal)
	}
}

// FuzzSbatch: ParseSbatch finds "id" or "id;cluster" on the last such line
// (site banners may precede it), or fails with ErrBadOutput;
// ParseReservationCreated finds the reservation name; Message is one line.
func FuzzSbatch(f *testing.F) {
	addCaptures(f)
	f.Add([]byte("Welcome to the cluster\n\n  4242;clusterA  \r\n"))
	idLine := regexp.MustCompile(`^[0-9]+(;[A-Za-z0-9_.-]+)?$`)
	f.Fuzz(func(t *testing.T, out []byte) {
		id, cluster, err := ParseSbatch(out)
		if err != nil {
			checkBad(t, "sbatch", err)
			if id != "" || cluster != "" {
				t.Fatalf("ParseSbatch failed but gave %q, %q", id, cluster)
			}
		} else {
			if id == "" || strings.Trim(string(id), "0123456789") != "" {
				t.Fatalf("ParseSbatch(%q) = id %q", out, id)
			}
			want := string(id)
			if cluster != "" {
				want += ";" + cluster
			}
			found := false
			for _, l := range lines(out) {
				l = strings.TrimSpace(l)
				if idLine.MatchString(l) {
					found = l == want // the last matching line wins
				}
			}
			if !found {
				t.Fatalf("ParseSbatch(%q) = %q, %q: not the last id line", out, id, cluster)
			}
		}
		name, err := ParseReservationCreated(out)
		if err != nil {
			checkBad(t, "scontrol create reservation", err)
		} else if name == "" || strings.ContainsAny(string(name), " \t\n\r") || !strings.Contains(string(out), "Reservation created: "+string(name)) {
			t.Fatalf("ParseReservationCreated(%q) = %q", out, name)
		}
		msg := Message(backends.Result{Stderr: out})
		if strings.ContainsAny(msg, "\n") || strings.Contains(msg, "sbatch: error: ") || msg != strings.TrimSpace(msg) {
			t.Fatalf("Message(%q) = %q: want one trimmed line without the sbatch prefix", out, msg)
		}
	})
}

// FuzzSqueue: one record per non-blank line, each with a valid id, a known
// state, a node count >= 0, an exit code and signal in range for a final
// state (-1 otherwise), and the grid id taken from a "gridsub:" comment.
func FuzzSqueue(f *testing.F) {
	addCaptures(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		recs, err := ParseSqueue(out)
		if err != nil {
			checkBad(t, "squeue", err)
			if recs != nil {
				t.Fatalf("ParseSqueue failed but gave %d records", len(recs))
			}
			return
		}
		if len(recs) != nonBlankLines(out) {
			t.Fatalf("ParseSqueue gave %d records for %d lines", len(recs), nonBlankLines(out))
		}
		for _, r := range recs {
			s := r.Status
			checkStatus(t, "squeue", s)
			if r.Nodes < 0 {
				t.Errorf("squeue: job %s on %d nodes", s.ID, r.Nodes)
			}
			if s.State.Final() && (s.ExitCode < 0 || s.ExitCode > 255 || s.Signal < 0 || s.Signal > 127) {
				t.Errorf("squeue: final job %s exit %d signal %d", s.ID, s.ExitCode, s.Signal)
			}
			if g, ok := strings.CutPrefix(r.Comment, "gridsub:"); ok && s.GridID != g || !ok && s.GridID != elementTag(string(s.ID), r.Comment) {
				t.Errorf("squeue: comment %q gave grid id %q", r.Comment, s.GridID)
			}
			if MapState(r.RawState) != s.State {
				t.Errorf("squeue: raw state %q maps to %s, record says %s", r.RawState, MapState(r.RawState), s.State)
			}
		}
	})
}

// FuzzScontrolJobs: `scontrol show job -o` lines and the reservation lines
// of `scontrol show reservation -o` (both key=value) parse to valid records
// or fail with ErrBadOutput; ParseKV keeps every key's first value, trimmed.
func FuzzScontrolJobs(f *testing.F) {
	addCaptures(f)
	f.Add([]byte("JobId=3 JobState=FAILED ExitCode=7:0 JobId=4 Comment=gridsub:g-1 StartTime=-5\n"))
	keyRE := regexp.MustCompile(`^[A-Z][A-Za-z0-9_:/]*$`)
	f.Fuzz(func(t *testing.T, out []byte) {
		js, err := ParseScontrolJobs(out, time.UTC)
		if err != nil {
			checkBad(t, "scontrol show job", err)
		} else {
			if len(js) != nonBlankLines(out) {
				t.Fatalf("ParseScontrolJobs gave %d jobs for %d lines", len(js), nonBlankLines(out))
			}
			for _, s := range js {
				checkStatus(t, "scontrol", s)
			}
		}
		rs, err := ParseReservations(out, time.UTC)
		if err != nil {
			checkBad(t, "scontrol show reservation", err)
		} else {
			for _, r := range rs {
				if r.ID == "" || r.Nodes < 0 || r.Start.IsZero() || r.End.IsZero() || r.End.Before(r.Start) {
					t.Errorf("reservation %+v accepted", r)
				}
			}
		}
		for _, l := range lines(out) {
			for k, v := range ParseKV(l) {
				if !keyRE.MatchString(k) || v != strings.TrimSpace(v) || !strings.Contains(l, k+"=") {
					t.Errorf("ParseKV(%q): %q = %q", l, k, v)
				}
			}
		}
	})
}

// FuzzJobComp: jobcomp/filetxt lines parse to records whose Name is the text
// between " Name=" and " JobState=" (names may hold spaces and '='), or fail
// with ErrBadOutput.
func FuzzJobComp(f *testing.F) {
	addCaptures(f)
	f.Add([]byte("JobId=9 Name=a Name=b JobState=X=1 JobState=COMPLETED WorkDir=/w/gridsub/g-1 ExitCode=0:0\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		recs, err := ParseJobComp(out, time.UTC)
		if err != nil {
			checkBad(t, "jobcomp", err)
			return
		}
		if len(recs) != nonBlankLines(out) {
			t.Fatalf("ParseJobComp gave %d records for %d lines", len(recs), nonBlankLines(out))
		}
		for i, r := range recs {
			checkStatus(t, "jobcomp", r.Status)
			l := lines(out)[i]
			if a, b := strings.Index(l, " Name="), strings.Index(l, " JobState="); a >= 0 && b > a && r.Name != l[a+len(" Name="):b] {
				t.Errorf("jobcomp line %q: name %q", l, r.Name)
			}
		}
	})
}

// FuzzSinfo: one node record per line, with a node and a partition name
// and a CPU count >= 0, or
// ErrBadOutput (also for no nodes at all); NodeUsable and NodeIdle agree.
func FuzzSinfo(f *testing.F) {
	addCaptures(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		recs, err := ParseSinfo(out)
		if err != nil {
			checkBad(t, "sinfo", err)
			return
		}
		if len(recs) == 0 || len(recs) != nonBlankLines(out) {
			t.Fatalf("ParseSinfo gave %d records for %d lines", len(recs), nonBlankLines(out))
		}
		for _, r := range recs {
			if r.CPUs < 0 || r.Node == "" || r.Partition == "" || strings.HasSuffix(r.Partition, "*") {
				t.Errorf("sinfo record %+v accepted", r)
			}
			if NodeIdle(r.State) && !NodeUsable(r.State) {
				t.Errorf("state %q is idle but not usable", r.State)
			}
		}
	})
}

// FuzzConfig: configValue reads "Key = value", trimmed.
func FuzzConfig(f *testing.F) {
	addCaptures(f)
	f.Add([]byte("JobCompType = jobcomp/filetxt\nJobCompLoc=/var/log/x\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, key := range []string{"JobCompType", "JobCompLoc"} {
			if v, ok := configValue(out, key); ok && v != strings.TrimSpace(v) {
				t.Errorf("configValue(%s) = %q, not trimmed", key, v)
			}
		}
	})
}
