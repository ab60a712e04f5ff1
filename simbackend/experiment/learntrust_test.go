package experiment

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

const learnTrustYAML = `name: learn-trust
workload:
  trace: CTC-SP2-1996-3.1-cln.swf.gz
  jobs: 300
  width_cap: 32
  seed: 7
testbed:
  h_set: large
  bandwidth: 100KB/s
  latency: 575ms
  LEARN
policies: [trust-min-min]
`

func runLearn(t *testing.T, learn string) []byte {
	t.Helper()
	e, err := Parse("learn.yaml", []byte(strings.Replace(learnTrustYAML, "LEARN", learn, 1)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Execute(context.Background(), e, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testbed.learn_trust runs deterministically, and on a workload where no
// job fails (the CTC jobs end within their estimates) every site keeps
// full trust, so Trust-Min-min's results are those of the runs on trust 1
// byte for byte: the papers' figures do not depend on the switch. The
// replay package's tests show learned scores reaching the planner.
func TestLearnTrustWithoutFailuresChangesNothing(t *testing.T) {
	needTraces(t)
	plain := runLearn(t, "p: 1.0")
	learned := runLearn(t, "learn_trust: paper002")
	again := runLearn(t, "learn_trust: paper002")
	if !bytes.Equal(learned, again) {
		t.Fatalf("learning trust is not deterministic:\n%s\n---\n%s", learned, again)
	}
	if !bytes.Equal(plain, learned) {
		t.Fatalf("no job failed, yet learned trust changed the results:\n%s\n---\n%s", plain, learned)
	}
}

func TestLearnTrustValidated(t *testing.T) {
	for _, tc := range []struct{ learn, key string }{
		{"learn_trust: paper02", "testbed.learn_trust"},
		{"trust_half_life: 1h", "testbed.trust_half_life"},
		{"learn_trust: paper002\n  trust_half_life: -1h", "testbed.trust_half_life"},
	} {
		_, err := Parse("learn.yaml", []byte(strings.Replace(learnTrustYAML, "LEARN", tc.learn, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("%s: %v, want an error at %s", tc.learn, err, tc.key)
		}
	}
}
