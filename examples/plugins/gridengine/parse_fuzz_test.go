package gridengine

import (
	"errors"
	"testing"
	"time"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/sshbatch"
	"github.com/gridsub/gridsub/backends/sshbatch/sshbatchtest"
)

// One fuzz target per parser, each seeded with every captured output in
// testdata/: a parser either refuses the bytes with ErrBadOutput or
// returns records whose ids are valid, and never panics.

func seed(f *testing.F) {
	f.Helper()
	sshbatchtest.SeedFiles(f, 15, "testdata/*")
}

func badOnly(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, backends.ErrBadOutput) {
		t.Fatalf("%s: error %v is not ErrBadOutput", what, err)
	}
}

func FuzzParseQsub(f *testing.F) {
	seed(f)
	f.Add([]byte("16.1-3:1\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		id, err := ParseQsub(out)
		badOnly(t, "ParseQsub", err)
		if err == nil && !validJobID(string(id)) {
			t.Fatalf("accepted id %q", id)
		}
	})
}

func FuzzParseQstatXML(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		jobs, err := ParseQstatXML(out)
		badOnly(t, "ParseQstatXML", err)
		for i := range jobs {
			st := jobs[i].Status(time.UTC)
			if !validJobID(string(st.ID)) || st.State != backends.StatePending && st.State != backends.StateRunning {
				t.Fatalf("job %+v -> %+v", jobs[i], st)
			}
		}
	})
}

func FuzzParseQhostXML(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		hosts, err := ParseQhostXML(out)
		badOnly(t, "ParseQhostXML", err)
		for _, h := range hosts {
			if h.NCPU < 1 || h.MemTotal < 0 {
				t.Fatalf("host %+v", h)
			}
		}
	})
}

func FuzzParseQueueList(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		qs, err := ParseQueueList(out)
		badOnly(t, "ParseQueueList", err)
		for _, q := range qs {
			if !queueRe.MatchString(q) {
				t.Fatalf("queue %q", q)
			}
		}
	})
}

func FuzzParseClusterQueues(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		cqs, err := ParseClusterQueues(out)
		badOnly(t, "ParseClusterQueues", err)
		for _, c := range cqs {
			if c.Used < 0 || c.Avail < 0 || c.Total < 0 {
				t.Fatalf("%+v", c)
			}
		}
	})
}

func FuzzParseQacct(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		recs, err := ParseQacct(out, time.UTC)
		badOnly(t, "ParseQacct", err)
		for i := range recs {
			if st := recs[i].Status(); !st.State.Final() || !validJobOrTask(string(st.ID)) {
				t.Fatalf("record %+v -> %+v", recs[i], st)
			}
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		p, err := ParseStatus(out, time.UTC)
		badOnly(t, "ParseStatus", err)
		if err != nil {
			return
		}
		ids := []backends.JobID{"1", "2", "208", "211", "4196.1", "4196.3", "4196.12", "4196.14"}
		for id, st := range Merge(p, ids, time.UTC) {
			if st.ID != id || st.State == backends.StateUnknown || st.GridID != "" && !sshbatch.ValidGridID(st.GridID) {
				t.Fatalf("%s -> %+v", id, st)
			}
		}
	})
}

func FuzzParseTagged(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		ts, err := ParseTagged(out)
		badOnly(t, "ParseTagged", err)
		for _, x := range ts {
			if !validJobID(x.Number) {
				t.Fatalf("%+v", x)
			}
			x.Tasks.Each(100, func(task int) {
				if task < 1 || !x.Tasks.Has(task) {
					t.Fatalf("%+v: task %d", x, task)
				}
			})
		}
	})
}

func FuzzParseQrsub(f *testing.F) {
	seed(f)
	f.Add([]byte("Your advance reservation 5 has been granted\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		id, err := ParseQrsub(out)
		badOnly(t, "ParseQrsub", err)
		if err == nil && !validResvID(string(id)) {
			t.Fatalf("accepted %q", id)
		}
	})
}

func FuzzParseQrstat(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		ars, _, err := ParseQrstat(out, time.UTC)
		badOnly(t, "ParseQrstat", err)
		for _, a := range ars {
			if !validResvID(a.ID) || a.Slots < 0 {
				t.Fatalf("%+v", a)
			}
		}
	})
}

func FuzzParseInfo(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		info, err := ParseInfo(out, "ge", "", 1)
		if err != nil {
			if !errors.Is(err, backends.ErrBadOutput) && !errors.Is(err, backends.ErrUnavailable) {
				t.Fatalf("ParseInfo: %v", err)
			}
			return
		}
		if info.Nodes < 0 || info.FreeNodes < 0 || info.FreeNodes > info.Nodes || len(info.Partitions) == 0 {
			t.Fatalf("%+v", info)
		}
	})
}

func FuzzParseIDFiles(f *testing.F) {
	seed(f)
	f.Add([]byte("gridsub/x:17\ngridsub/x-1:abc\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, id := range ParseIDFiles(out) {
			if !validJobOrTask(string(id)) {
				t.Fatalf("id %q", id)
			}
		}
	})
}

func FuzzParseArrayLimits(f *testing.F) {
	seed(f)
	f.Fuzz(func(t *testing.T, out []byte) {
		l, err := ParseArrayLimits(out)
		badOnly(t, "ParseArrayLimits", err)
		if err == nil && (l.MaxTasks < 0 || l.MaxInstances < 0) {
			t.Fatalf("limits %+v", l)
		}
	})
}

func FuzzParseArrayQsub(f *testing.F) {
	seed(f)
	f.Add([]byte("3649.1-200:1\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		id, err := ParseArrayQsub(out)
		badOnly(t, "ParseArrayQsub", err)
		if err == nil && !validJobID(id) {
			t.Fatalf("accepted array %q", id)
		}
	})
}

func FuzzParseTaskSet(f *testing.F) {
	for _, s := range []string{"8,9,11-19:1,23-30:1", "1-200:1", "20-22:1", "4", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTaskSet(s)
		if err != nil {
			return
		}
		n := 0
		ts.Each(1000, func(task int) {
			n++
			if task < 1 || !ts.Has(task) {
				t.Fatalf("%q: Each gave %d, Has says no", s, task)
			}
		})
		if n > 1000 {
			t.Fatalf("%q: Each ran past its limit", s)
		}
	})
}
