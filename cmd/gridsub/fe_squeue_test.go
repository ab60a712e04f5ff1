package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge"
	"github.com/gridsub/gridsub/bridge/api"
	"github.com/gridsub/gridsub/frontend"
)

// queueServer serves GET /v1/health and GET /v1/queue with n unfinished
// jobs, as the daemon encodes them.
func queueServer(tb testing.TB, n int) *httptest.Server {
	const prefix = "g0lx8k2p3q9ab-"
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var body []byte
	body = append(body, "id\tparent\tindex\tname\tstate\tnodes\tcores\testimate_s\tsubmit_unix\tstart_unix\tpredicted\tsites\tpartition\taccount\n"...)
	for i := range n {
		r := api.QueueRow{ID: fmt.Sprintf("%s%06d", prefix, i+1), Name: "bulk", State: bridge.Queued, Nodes: 1 + i%4, Cores: i % 3,
			Estimate: time.Duration(1+i%50) * time.Hour, Submit: t0.Add(time.Duration(i) * time.Second), Predicted: i%2 == 0}
		switch i % 5 {
		case 1:
			r.State, r.Start, r.Sites = bridge.Running, t0.Add(time.Hour), []string{"Beijing"}
		case 2:
			r.Parent, r.Index, r.ID = fmt.Sprintf("%s%06d", prefix, i), i%7, fmt.Sprintf("%s%06d_%d", prefix, i, i%7)
		case 3:
			r.State, r.Partition, r.Account = bridge.Held, "debug", "proj"
		case 4:
			r.State = bridge.Dispatched
		}
		body = api.AppendQueueRow(body, r)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","time":%q,"sites":3,"id_prefix":%q}`, t0.Add(2*time.Hour).Format(time.RFC3339), prefix)
	})
	mux.HandleFunc("GET /v1/queue", func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return srv
}

// BenchmarkSqueue10000 is one squeue call's work in the client (the
// request, parsing and printing) for 10,000 unfinished jobs, in the
// default format and in Toil's.
func BenchmarkSqueue10000(b *testing.B) {
	srv := queueServer(b, 10000)
	b.Setenv(envURL, "")
	b.Setenv(envSocket, "")
	g0 := &frontend.Env{Connect: func(context.Context, string) (*api.Client, string, error) {
		return api.NewClient(srv.URL, "", nil), srv.URL, nil
	}}
	for _, args := range [][]string{nil, {"-h", "-o", "%i %t %M"}} {
		b.Run(fmt.Sprint(args), func(b *testing.B) {
			g := &frontend.Env{Stdout: io.Discard, Stderr: io.Discard, Connect: g0.Connect}
			for b.Loop() {
				if err := frontend.Run(context.Background(), g, "squeue", args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSqueueSameAsBefore (GRIDSUB_SPEED_BEFORE=/path/to/an/older/gridsub):
// this squeue prints, byte for byte, what that one prints for 10,000 jobs
// in every format below.
func TestSqueueSameAsBefore(t *testing.T) {
	before := os.Getenv("GRIDSUB_SPEED_BEFORE")
	if before == "" {
		t.Skip("GRIDSUB_SPEED_BEFORE=/path/to/an/older/gridsub compares this squeue's output with that one's")
	}
	srv := queueServer(t, 10000)
	env := append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "GRIDSUB_") }), envURL+"="+srv.URL)
	after := buildBinary(t)
	for _, args := range [][]string{nil, {"-h"}, {"-l"}, {"-h", "-o", "%i %t %M"}, {"-o", "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"},
		{"-o", "%i|%j|%t|%T|%M|%D|%P|%u|%R|%r|%l|%L|%C|%N|%S|%V|%e|%a|%q|%o|%A|%K|%F|%Z|%%"}, {"-t", "R"}, {"-t", "PD", "-p", "debug"},
		{"-A", "proj", "-o", "%.3i%-20j:%5T"}} {
		var outs []string
		for _, bin := range []string{before, after} {
			cmd := exec.Command(bin, append([]string{"squeue"}, args...)...)
			cmd.Env = env
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s squeue %q: %v", bin, args, err)
			}
			outs = append(outs, string(out))
		}
		if outs[0] != outs[1] {
			t.Errorf("squeue %q differs (%d and %d bytes)", args, len(outs[0]), len(outs[1]))
		} else if strings.Count(outs[0], "\n") < 1000 {
			t.Errorf("squeue %q: %d lines", args, strings.Count(outs[0], "\n"))
		}
	}
}
