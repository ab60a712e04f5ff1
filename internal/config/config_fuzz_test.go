package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"

	"github.com/gridsub/gridsub/configs"
)

// Native fuzz targets of the site configuration. The seeds are every
// built-in configuration (configs/*.yaml); scripts/fuzz.sh runs each target
// for a bounded time.

// fuzzEnv is the environment the fuzzed configurations see: a home and what
// the local testbed's testbed.env exports, so local-slurm.yaml loads.
var fuzzEnv = map[string]string{
	"HOME":                          "/home/fuzz",
	"GRIDSUB_SSH_HOST":              "127.0.0.1",
	"GRIDSUB_SSH_USER":              "griduser",
	"GRIDSUB_SSH_KEY":               "/var/tmp/t/id_ed25519",
	"GRIDSUB_SSH_KNOWN_HOSTS":       "/var/tmp/t/known_hosts",
	"GRIDSUB_SITEA_SSH_PORT":        "2222",
	"GRIDSUB_SITEB_SSH_PORT":        "2223",
	"GRIDSUB_SITEA_SCRATCH":         "/var/tmp/t/siteA",
	"GRIDSUB_SITEB_SCRATCH":         "/var/tmp/t/siteB",
	"GRIDSUB_SITEA_CPUS_PER_NODE":   "2",
	"GRIDSUB_SITEB_CPUS_PER_NODE":   "2",
	"GRIDSUB_FUZZ_EMPTY":            "",
	"GRIDSUB_FUZZ_WITH_REFERENCE":   "${HOME}",
	"GRIDSUB_FUZZ_WITH_SPACES_HERE": " a b ",
}

// watchdog panics when one input runs longer than hangAfter: the fuzzer has
// no per-input timeout, and a panic makes it save the input as a crasher.
// Call it as defer watchdog(input)().
func watchdog(input any) (stop func()) {
	t := time.AfterFunc(hangAfter, func() { panic(fmt.Sprintf("input still running after %s: %q", hangAfter, input)) })
	return func() { t.Stop() }
}

const hangAfter = 10 * time.Second

func fuzzLookup(k string) (string, bool) { v, ok := fuzzEnv[k]; return v, ok }

// The documented rules, written out again rather than taken from the code.
var (
	wantSiteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	wantPolicy   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)
)

var configSentinels = []error{ErrRead, ErrUnknownKey, ErrInvalid, ErrSecret, ErrMissingEnv}

// FuzzSiteConfig feeds arbitrary bytes to Parse. A failure must be an Errors
// list of *Error, each naming the source and wrapping exactly one sentinel; an
// accepted configuration must satisfy every documented range, build a
// snapshot whose link matrix is finite, and come back unchanged when written
// out as YAML and parsed again (${ escaped as $${).
func FuzzSiteConfig(f *testing.F) {
	names := configs.Names()
	if len(names) == 0 {
		f.Fatal("no built-in configurations")
	}
	for _, n := range names {
		data, err := configs.Read(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("sites: [{name: A, kind: sim, nodes: 1, h: \"${GRIDSUB_FUZZ_WITH_REFERENCE}$${HOME}\"}]\nbroker: {cron: {x: '@every 1m'}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const source = "fuzz.yaml"
		defer watchdog(data)()
		c, err := Parse(source, data, fuzzLookup)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a configuration and an error: %v", err)
			}
			checkConfigErrors(t, source, err)
			return
		}
		checkConfig(t, c)
		again := configRoundTrip(t, c)
		for _, x := range []*Config{c, again} {
			x.Source = ""
			if len(x.Network.Links) == 0 {
				x.Network.Links = nil
			}
			if len(x.Broker.Cron) == 0 {
				x.Broker.Cron = nil
			}
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("configuration changed when written out and parsed again:\nfirst:  %+v\nsecond: %+v", *c, *again)
		}
	})
}

func checkConfigErrors(t *testing.T, source string, err error) {
	t.Helper()
	var list Errors
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error is %T, want a non-empty Errors: %v", err, err)
	}
	for i, e := range list {
		if e == nil {
			t.Fatalf("error %d is nil", i)
		}
		if e.File != source || !strings.HasPrefix(e.Error(), source+": ") || e.Msg == "" {
			t.Errorf("error %q does not name the source %s or says nothing", e.Error(), source)
		}
		n := 0
		for _, s := range configSentinels {
			if errors.Is(e, s) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("error %q wraps %d sentinels, want exactly 1", e.Error(), n)
		}
	}
}

func finitePositive(f float64) bool { return f > 0 && !math.IsInf(f, 0) }

// checkConfig holds an accepted configuration to the documented ranges.
func checkConfig(t *testing.T, c *Config) {
	t.Helper()
	if len(c.Sites) == 0 {
		t.Fatal("no sites accepted")
	}
	seen := map[string]bool{}
	for i, s := range c.Sites {
		if !wantSiteName.MatchString(s.Name) || seen[s.Name] {
			t.Errorf("site %d name %q accepted (twice: %v)", i, s.Name, seen[s.Name])
		}
		seen[s.Name] = true
		if !finitePositive(s.H) || s.CoresPerNode < 1 {
			t.Errorf("site %s: h %v, cores_per_node %d", s.Name, s.H, s.CoresPerNode)
		}
		switch s.Kind {
		case KindSim:
			if s.Nodes < 1 || s.SSH != nil || s.RemoteDir != "" || s.Partition != "" {
				t.Errorf("sim site %+v", s)
			}
		case KindLocal:
			if s.Plugin == nil && (s.Nodes < 1 || s.SSH != nil || !path.IsAbs(s.RemoteDir) || s.Partition != "") {
				t.Errorf("local site %+v", s)
			}
		case KindSlurm, KindPBS:
			x := s.SSH
			if s.Nodes < 0 || x == nil || !path.IsAbs(s.RemoteDir) {
				t.Fatalf("remote site %+v", s)
			}
			if x.Host == "" || x.User == "" || x.Port < 1 || x.Port > 65535 || x.MaxSessions < 1 || x.MaxSessions > 1024 {
				t.Errorf("site %s ssh %+v", s.Name, *x)
			}
			if x.KeyFile == "" && !x.Agent || x.KnownHosts == "" && !x.InsecureIgnoreHostKey {
				t.Errorf("site %s: no way to authenticate or to check the host key: %+v", s.Name, *x)
			}
		default:
			t.Errorf("site %s kind %q accepted", s.Name, s.Kind)
		}
	}
	n := c.Network
	if !(n.Default.Bandwidth > 0) || n.Default.Latency < 0 || !(n.MultiSiteFactor >= 1) || math.IsInf(n.MultiSiteFactor, 0) {
		t.Errorf("network %+v", n)
	}
	for i, l := range n.Links {
		if !seen[l.From] || !seen[l.To] || l.From == l.To || !(l.Bandwidth > 0) || l.Latency < 0 {
			t.Errorf("network.links[%d] %+v", i, l)
		}
	}
	b := c.Broker
	if b.Interval <= 0 || b.PollInterval <= 0 || !path.IsAbs(b.StateDir) || b.Socket == "" || !wantPolicy.MatchString(b.Policy) {
		t.Errorf("broker %+v", b)
	}
	for name, spec := range b.Cron {
		if _, err := cron.ParseStandard(spec); err != nil {
			t.Errorf("broker.cron.%s %q accepted: %v", name, spec, err)
		}
	}
	if !finitePositive(c.Sim.TimeScale) {
		t.Errorf("sim.time_scale %v", c.Sim.TimeScale)
	}
	snap := c.Snapshot(time.Unix(0, 0))
	if len(snap.Sites) != len(c.Sites) || len(snap.Links) != len(c.Sites) {
		t.Fatalf("snapshot of %d sites has %d sites, %d link rows", len(c.Sites), len(snap.Sites), len(snap.Links))
	}
	for i, row := range snap.Links {
		if len(row) != len(c.Sites) {
			t.Fatalf("link row %d has %d entries", i, len(row))
		}
		for j, l := range row {
			if l.SecPerByte < 0 || math.IsInf(l.SecPerByte, 0) || math.IsNaN(l.SecPerByte) || l.Latency < 0 || i != j && l.SecPerByte == 0 {
				t.Errorf("link %d->%d = %+v", i, j, l)
			}
		}
	}
}

// escape writes a string so that ${VAR} expansion gives it back.
func escape(s string) string { return strings.ReplaceAll(s, "${", "$${") }

// bitsPerSecond writes a bandwidth exactly: b·8 is exact in binary, and
// ParseBandwidth divides the bits by 8 again.
func bitsPerSecond(b Bandwidth) string {
	return strconv.FormatFloat(float64(b)*8, 'f', -1, 64) + "bps"
}

// configRoundTrip writes c out as a configuration file and parses it again.
func configRoundTrip(t *testing.T, c *Config) *Config {
	t.Helper()
	var sites []map[string]any
	for _, s := range c.Sites {
		m := map[string]any{"name": escape(s.Name), "kind": escape(s.Kind), "nodes": s.Nodes, "cores_per_node": s.CoresPerNode, "h": s.H}
		if s.Partition != "" {
			m["partition"] = escape(s.Partition)
		}
		if s.MemPerNode != 0 {
			m["mem_per_node"] = s.MemPerNode.String()
		}
		if s.GPUsPerNode != 0 {
			m["gpus_per_node"] = s.GPUsPerNode
		}
		if s.Account != "" {
			m["account"] = escape(s.Account)
		}
		if s.RemoteDir != "" {
			m["remote_dir"] = escape(s.RemoteDir)
		}
		if s.BinDir != "" {
			m["bin_dir"] = escape(s.BinDir)
		}
		if x := s.SSH; x != nil {
			m["ssh"] = map[string]any{"host": escape(x.Host), "port": x.Port, "user": escape(x.User), "key_file": escape(x.KeyFile),
				"known_hosts": escape(x.KnownHosts), "agent": x.Agent, "insecure_ignore_host_key": x.InsecureIgnoreHostKey, "max_sessions": x.MaxSessions}
		}
		sites = append(sites, m)
	}
	var links []map[string]any
	for _, l := range c.Network.Links {
		links = append(links, map[string]any{"from": escape(l.From), "to": escape(l.To), "bandwidth": bitsPerSecond(l.Bandwidth), "latency": l.Latency.String()})
	}
	crons := map[string]string{}
	for k, v := range c.Broker.Cron {
		crons[k] = escape(v)
	}
	doc := map[string]any{
		"sites": sites,
		"network": map[string]any{
			"default":           map[string]any{"bandwidth": bitsPerSecond(c.Network.Default.Bandwidth), "latency": c.Network.Default.Latency.String()},
			"links":             links,
			"multi_site_factor": c.Network.MultiSiteFactor,
		},
		"broker": map[string]any{"policy": escape(c.Broker.Policy), "interval": c.Broker.Interval.String(), "poll_interval": c.Broker.PollInterval.String(),
			"state_dir": escape(c.Broker.StateDir), "socket": escape(c.Broker.Socket), "cron": crons},
		"sim": map[string]any{"time_scale": c.Sim.TimeScale, "seed": c.Sim.Seed},
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatalf("yaml.Marshal: %v", err)
	}
	again, err := Parse("again.yaml", data, fuzzLookup)
	if err != nil {
		t.Fatalf("the accepted configuration written out again is refused: %v\n%s", err, data)
	}
	return again
}

// FuzzBandwidth: ParseBandwidth accepts only rates in (0, 1e15] bytes per
// second, and what it accepts is written back by String in a form it reads
// again (to the byte: sizes are whole bytes).
func FuzzBandwidth(f *testing.F) {
	for _, s := range []string{"1MB/s", "100KB/s", "64KiB/s", "10Mbps", "1Gbps", "10Kbps", "1bps", "0.5B/s", "1e3Mbps", "1.5 GB/s", "-1MB/s", "NaNbps", "infGbps", "1e16B/s", "MB/s", "8bps"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBandwidth(s)
		if err != nil {
			if b != 0 || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseBandwidth(%q) = %v, %v: an error must give 0 and quote the input", s, b, err)
			}
			return
		}
		if !(b > 0) || b > 1e15 || math.IsInf(float64(b), 0) {
			t.Fatalf("ParseBandwidth(%q) = %v, out of (0, 1e15]", s, b)
		}
		if sp := b.SecPerByte(); !(sp > 0) || math.IsInf(sp, 0) {
			t.Fatalf("SecPerByte of %v = %v", b, sp)
		}
		exact, err := ParseBandwidth(bitsPerSecond(b))
		if err != nil || exact != b {
			t.Fatalf("ParseBandwidth(%q) = %v, %v; want %v", bitsPerSecond(b), exact, err, b)
		}
		if b >= 1 {
			back, err := ParseBandwidth(b.String())
			if err != nil || math.Abs(float64(back-b)) > 0.5 {
				t.Fatalf("ParseBandwidth(%q) = %v (String of %v), %v", b.String(), back, b, err)
			}
		}
	})
}
