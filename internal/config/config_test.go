package config

import (
	"errors"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/configs"
	"github.com/gridsub/gridsub/policy"
)

// testbedEnv is what the local testbed's testbed.env exports (the parts
// local-slurm.yaml reads).
var testbedEnv = map[string]string{
	"HOME":                    "/home/u",
	"GRIDSUB_SITES":           "siteA siteB", // must not replace the site list
	"GRIDSUB_SSH_HOST":        "127.0.0.1",
	"GRIDSUB_SSH_USER":        "griduser",
	"GRIDSUB_SSH_KEY":         "/var/tmp/gridsub-testbed/client/id_ed25519",
	"GRIDSUB_SSH_KNOWN_HOSTS": "/var/tmp/gridsub-testbed/client/known_hosts",
	"GRIDSUB_SITEA_SSH_PORT":  "2222",
	"GRIDSUB_SITEB_SSH_PORT":  "2223",
	"GRIDSUB_SITEA_SCRATCH":   "/var/tmp/gridsub-testbed/siteA/scratch/griduser",
	"GRIDSUB_SITEB_SCRATCH":   "/var/tmp/gridsub-testbed/siteB/scratch/griduser",
	// The OpenPBS testbed's (configs/local-pbs.yaml).
	"GRIDSUB_PBS_SSH_HOST":        "127.0.0.1",
	"GRIDSUB_PBS_SSH_PORT":        "2330",
	"GRIDSUB_PBS_SSH_USER":        "pbsuser",
	"GRIDSUB_PBS_SSH_KEY":         "/var/tmp/gridsub-pbs/client/id_ed25519",
	"GRIDSUB_PBS_SSH_KNOWN_HOSTS": "/var/tmp/gridsub-pbs/client/known_hosts",
	"GRIDSUB_PBS_HOME_DIR":        "/home/pbsuser",
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

func parseBuiltin(t *testing.T, name string, e map[string]string) *Config {
	t.Helper()
	data, err := configs.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(name, data, env(e))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return c
}

func TestBuiltinTestbeds(t *testing.T) {
	for _, tc := range []struct {
		file  string
		nodes []int
		h     []float64
		cores []int
	}{
		{"testbed.yaml", []int{128, 64, 32}, []float64{1, 1, 1}, []int{8, 4, 4}},
		{"testbed-large-h.yaml", []int{128, 64, 32}, []float64{1.4, 1.0, 0.6}, []int{1, 1, 1}},
	} {
		c := parseBuiltin(t, tc.file, map[string]string{"HOME": "/home/u"})
		if got := strings.Join(c.SiteNames(), ","); got != "Beijing,Shanghai,Harbin" {
			t.Errorf("%s: sites %s", tc.file, got)
		}
		for i, s := range c.Sites {
			if s.Kind != KindSim || s.Nodes != tc.nodes[i] || s.H != tc.h[i] || s.CoresPerNode != tc.cores[i] {
				t.Errorf("%s: site %d = %+v", tc.file, i, s)
			}
		}
		if c.TotalNodes() != 224 || c.Network.MultiSiteFactor != 1.1 || c.Network.Default.Bandwidth != 1e6 ||
			c.Network.Default.Latency != 575*time.Millisecond || c.Broker.Policy != "optimal-easy" || c.Sim.TimeScale != 600 || c.Sim.Seed != 1 {
			t.Errorf("%s: %+v", tc.file, c)
		}
		if c.Broker.StateDir != "/home/u/.local/state/gridsub" || c.Broker.Socket != "/home/u/.local/state/gridsub/gridsub.sock" {
			t.Errorf("%s: state dir %q socket %q", tc.file, c.Broker.StateDir, c.Broker.Socket)
		}
		snap := c.Snapshot(time.Unix(0, 0))
		// 50 MB from Beijing to Harbin at 1 MB/s + 575 ms (SPEC.md §1).
		if got := snap.TransferTime(0, 2, 50e6); got != 50*time.Second+575*time.Millisecond {
			t.Errorf("%s: transfer time %v", tc.file, got)
		}
		if snap.TransferTime(1, 1, 50e6) != 0 || snap.Sites[2].Free != 32 || snap.MultiSite != 1.1 {
			t.Errorf("%s: snapshot %+v", tc.file, snap)
		}
	}
}

func TestLoadPaths(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("XDG_STATE_HOME", "")
	c, err := LoadDefault()
	if err != nil || len(c.Sites) != 1 || !strings.Contains(c.Source, "local.yaml") {
		t.Fatalf("LoadDefault = %+v, %v", c, err)
	}
	// The default's one site runs processes here: one slot per core, its
	// job directories under the state directory.
	if s := c.Sites[0]; s.Kind != KindLocal || s.Nodes != runtime.NumCPU() || s.CoresPerNode != 1 ||
		s.RemoteDir != "/home/u/.local/state/gridsub/sites/local" {
		t.Errorf("default site %+v", s)
	}
	if c, err = Load("testbed"); err != nil || len(c.Sites) != 3 {
		t.Fatalf("Load(testbed) = %+v, %v", c, err)
	}
	c, err = Load("sim-pair")
	if err != nil || c.TotalNodes() != 56 {
		t.Fatalf("Load(sim-pair) = %+v, %v", c, err)
	}
	// The link is given one way and applies both ways; other pairs use the default.
	l := c.Links()
	if l[0][1].SecPerByte != 2e-6 || l[1][0] != l[0][1] || l[0][1].Latency != 550*time.Millisecond || l[0][0] != (policy.Link{}) {
		t.Errorf("sim-pair links = %+v", l)
	}
	c, err = Load("../../configs/testbed-large-h.yaml")
	if err != nil || c.Sites[0].H != 1.4 {
		t.Fatalf("Load(file) = %+v, %v", c, err)
	}
	if _, err := Load("no-such-config"); !errors.Is(err, ErrRead) || !strings.Contains(err.Error(), "testbed.yaml") {
		t.Errorf("Load(missing) = %v", err)
	}
	t.Setenv("XDG_STATE_HOME", "/xdg")
	if c, err := LoadDefault(); err != nil || c.Broker.StateDir != "/xdg/gridsub" {
		t.Errorf("state dir with XDG_STATE_HOME = %q, %v", c.Broker.StateDir, err)
	}
}

func TestLocalSlurm(t *testing.T) {
	c := parseBuiltin(t, "local-slurm.yaml", testbedEnv)
	if got := strings.Join(c.SiteNames(), ","); got != "siteA,siteB" {
		t.Fatalf("sites %s", got)
	}
	a, b := c.Sites[0], c.Sites[1]
	if a.Kind != KindSlurm || a.Nodes != 8 || a.CoresPerNode != 2 || a.Partition != "batch" || a.RemoteDir != testbedEnv["GRIDSUB_SITEA_SCRATCH"] {
		t.Errorf("siteA = %+v", a)
	}
	if b.Nodes != 4 || b.CoresPerNode != 4 || b.Partition != "compute" || b.SSH.Port != 2223 {
		t.Errorf("siteB = %+v %+v", b, b.SSH)
	}
	want := SSH{Host: "127.0.0.1", Port: 2222, User: "griduser", KeyFile: testbedEnv["GRIDSUB_SSH_KEY"], KnownHosts: testbedEnv["GRIDSUB_SSH_KNOWN_HOSTS"], MaxSessions: 8}
	if *a.SSH != want {
		t.Errorf("siteA ssh = %+v, want %+v", *a.SSH, want)
	}
	if i, ok := c.SiteIndex("siteB"); !ok || i != 1 {
		t.Errorf("SiteIndex(siteB) = %d, %v", i, ok)
	}
	if _, ok := c.SiteIndex("siteb"); ok {
		t.Error("site names must be case-sensitive")
	}
	if s, ok := c.Site("siteA"); !ok || s.Partition != "batch" {
		t.Errorf("Site(siteA) = %+v", s)
	}
}

func TestMissingEnv(t *testing.T) {
	data, _ := configs.Read("local-slurm")
	_, err := Parse("local-slurm.yaml", data, env(with(testbedEnv, "GRIDSUB_SSH_HOST", "<unset>", "GRIDSUB_SITEB_SCRATCH", "")))
	var list Errors
	if !errors.As(err, &list) || len(list) != 2 || !errors.Is(err, ErrMissingEnv) {
		t.Fatalf("err = %v, want 2 ErrMissingEnv", err)
	}
	// One error per variable, sorted by variable name.
	if !strings.Contains(list[0].Error(), "sites[1].remote_dir: ${GRIDSUB_SITEB_SCRATCH} is empty") {
		t.Errorf("error 0 = %q", list[0])
	}
	if !strings.Contains(list[1].Error(), "sites[0].ssh.host: ${GRIDSUB_SSH_HOST} is not set") ||
		!strings.Contains(list[1].Error(), "(also used by sites[1].ssh.host)") ||
		!strings.Contains(list[1].Error(), "source "+TestbedDir+"/testbed.env") {
		t.Errorf("error 1 = %q", list[1])
	}
}

func TestExpansionAndOverrides(t *testing.T) {
	src := `
sites:
  - name: ${SITE_NAME:-Local}
    kind: sim
    nodes: ${NODES}
    h: "${H}"
broker:
  policy: greedy
  state_dir: /state/$${HOME}
  cron: {trust_decay: "@every 10m"}
`
	e := map[string]string{"HOME": "/h", "NODES": "12", "H": "0.5",
		"GRIDSUB_BROKER_POLICY": "optimal", "GRIDSUB_SIM_TIME_SCALE": "60", "GRIDSUB_NETWORK_MULTI_SITE_FACTOR": "1.3",
		"GRIDSUB_BROKER_INTERVAL": "250ms", "GRIDSUB_SITES": "siteA siteB"}
	c, err := Parse("x.yaml", []byte(src), env(e))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sites[0]
	if s.Name != "Local" || s.Nodes != 12 || s.H != 0.5 {
		t.Errorf("site = %+v", s)
	}
	if c.Broker.Policy != "optimal" || c.Sim.TimeScale != 60 || c.Network.MultiSiteFactor != 1.3 || c.Broker.Interval != 250*time.Millisecond {
		t.Errorf("overrides not applied: %+v %+v %+v", c.Broker, c.Sim, c.Network)
	}
	if c.Broker.StateDir != "/state/${HOME}" || c.Broker.Cron["trust_decay"] != "@every 10m" {
		t.Errorf("$${ escape = %q, cron %v", c.Broker.StateDir, c.Broker.Cron)
	}
	if EnvName("network.multi_site_factor") != "GRIDSUB_NETWORK_MULTI_SITE_FACTOR" {
		t.Error("EnvName")
	}
	_, err = Parse("x.yaml", []byte(src), env(with(e, "GRIDSUB_SIM_TIME_SCALE", "fast")))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `sim.time_scale: must be a number, got "fast"`) {
		t.Errorf("bad override: %v", err)
	}
}

func TestSecretsRefused(t *testing.T) {
	for _, tc := range []struct{ src, key string }{
		{"sites: [{name: A, kind: slurm, ssh: {host: h, password: hunter2}}]", "sites[0].ssh.password"},
		{"sites: [{name: A, kind: sim, nodes: 1, api_token: x}]", "sites[0].api_token"},
		{"sites: [{name: A, kind: slurm, ssh: {key_passphrase: x}}]", "sites[0].ssh.key_passphrase"},
		{"broker: {cron: {db_secret: x}}\nsites: [{name: A, kind: sim, nodes: 1}]", "broker.cron.db_secret"},
		{"sites: [{name: A, kind: slurm, ssh: {key_file: \"-----BEGIN OPENSSH PRIVATE KEY-----\\nabc\"}}]", "sites[0].ssh.key_file"},
	} {
		_, err := Parse("s.yaml", []byte(tc.src), env(map[string]string{"HOME": "/h"}))
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrSecret) {
			t.Errorf("%s: err = %v, want ErrSecret", tc.key, err)
			continue
		}
		if !strings.Contains(err.Error(), "s.yaml: "+tc.key+": ") || !strings.Contains(err.Error(), "ssh.key_file") || !strings.Contains(err.Error(), "ssh-agent") {
			t.Errorf("%s: message %q should name the key and the alternatives", tc.key, err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the secret itself leaks into the error: %q", err)
		}
	}
}

// TestValidation: each rule, one at a time, on top of a valid configuration.
func TestValidation(t *testing.T) {
	const base = "sites:\n  - {name: A, kind: sim, nodes: 4}\n  - {name: B, kind: sim, nodes: 2}\n"
	const remote = "sites:\n  - {name: R, kind: slurm, remote_dir: /scratch, ssh: {host: h, user: u, key_file: /k, known_hosts: /kh%s}}\n"
	for _, tc := range []struct {
		name, src, key, text string
		sentinel             error
	}{
		{"no sites", "broker: {policy: greedy}\n", "sites", "at least one site", ErrInvalid},
		{"unknown key", base + "brokr: {policy: x}\n", "brokr", "unknown key `brokr` at the top level (valid: sites, network, broker, sim, staging, users, store); did you mean `broker`?", ErrUnknownKey},
		{"unknown site key", "sites: [{name: A, kind: sim, node: 4}]\n", "sites[0].node", "did you mean `nodes`?", ErrUnknownKey},
		{"bad yaml", "sites: [\n", "", "not valid YAML", ErrRead},
		{"sites not a list", "sites: {name: A}\n", "sites", "must be a list, got a mapping", ErrInvalid},
		{"bad name", "sites: [{name: 'a b', kind: sim, nodes: 1}]\n", "sites[0].name", "must be 1-64", ErrInvalid},
		{"dup name", base + "  - {name: A, kind: sim, nodes: 1}\n", "sites[2].name", "already the name of sites[0]", ErrInvalid},
		{"kind", "sites: [{name: A, kind: slrum, nodes: 1}]\n", "sites[0].kind", `did you mean "slurm"?`, ErrInvalid},
		{"sim nodes", "sites: [{name: A, kind: sim}]\n", "sites[0].nodes", "needs nodes from 1 to 1048576", ErrInvalid},
		{"nodes type", "sites: [{name: A, kind: sim, nodes: [1]}]\n", "sites[0].nodes", "must be a whole number, got a list", ErrInvalid},
		{"h zero", "sites: [{name: A, kind: sim, nodes: 1, h: 0}]\n", "sites[0].h", "must be a number from 0.01 to 100", ErrInvalid},
		{"cores", "sites: [{name: A, kind: sim, nodes: 1, cores_per_node: 0}]\n", "sites[0].cores_per_node", "from 1 to 65536", ErrInvalid},
		{"sim with ssh", "sites: [{name: A, kind: sim, nodes: 1, ssh: {host: h}}]\n", "sites[0].ssh", "only slurm and pbs", ErrInvalid},
		{"slurm no ssh", "sites: [{name: A, kind: slurm, remote_dir: /x}]\n", "sites[0].ssh", "missing", ErrInvalid},
		{"remote_dir relative", "sites: [{name: R, kind: pbs, remote_dir: scratch, ssh: {host: h, user: u, key_file: /k, known_hosts: /kh}}]\n", "sites[0].remote_dir", "clean absolute path", ErrInvalid},
		{"port", strings.Replace(remote, "%s", ", port: 70000", 1), "sites[0].ssh.port", "1..65535, got 70000", ErrInvalid},
		{"no key", strings.Replace(strings.Replace(remote, "key_file: /k, ", "", 1), "%s", "", 1), "sites[0].ssh.key_file", "agent: true", ErrInvalid},
		{"no known_hosts", strings.Replace(strings.Replace(remote, ", known_hosts: /kh", "", 1), "%s", "", 1), "sites[0].ssh.known_hosts", "insecure_ignore_host_key", ErrInvalid},
		{"sessions", strings.Replace(remote, "%s", ", max_sessions: 0", 1), "sites[0].ssh.max_sessions", "1..1024", ErrInvalid},
		{"bandwidth", base + "network: {default: {bandwidth: 10}}\n", "network.default.bandwidth", "(bits per second), got 10", ErrInvalid},
		{"bandwidth zero", base + "network: {default: {bandwidth: 0MB/s}}\n", "network.default.bandwidth", "must be > 0", ErrInvalid},
		{"latency number", base + "network: {default: {latency: 5}}\n", "network.default.latency", "with a unit", ErrInvalid},
		{"staging size", base + "staging: {max_file_size: 10 bananas}\n", "staging.max_file_size", `cannot read "10 bananas"`, ErrInvalid},
		{"staging size negative", base + "staging: {max_file_size: -5}\n", "staging.max_file_size", "number of bytes >= 0, got", ErrInvalid},
		{"staging size zero", base + "staging: {max_file_size: 0}\n", "staging.max_file_size", "must be a size > 0", ErrInvalid},
		{"staging job below file", base + "staging: {max_file_size: 2GiB, max_job_bytes: 1GiB}\n", "staging.max_job_bytes", "at least staging.max_file_size (2147483648 bytes)", ErrInvalid},
		{"staging huge", base + "staging: {max_job_bytes: 100000000TiB}\n", "staging.max_job_bytes", "too large", ErrInvalid},
		{"staging rate", base + "staging: {min_rate: 0MB/s}\n", "staging.min_rate", "must be > 0", ErrInvalid},
		{"staging min_time", base + "staging: {min_time: 0s}\n", "staging.min_time", "between 1s and 24h", ErrInvalid},
		{"staging workers", base + "staging: {fetch_workers: 0}\n", "staging.fetch_workers", "must be 1-64, got 0", ErrInvalid},
		{"staging fetch timeout", base + "staging: {fetch_timeout: 100000h}\n", "staging.fetch_timeout", "between 1s and 720h", ErrInvalid},
		{"link site", base + "network: {links: [{from: A, to: C, bandwidth: 1MB/s}]}\n", "network.links[0].to", `unknown site "C" (sites: A, B)`, ErrInvalid},
		{"link self", base + "network: {links: [{from: A, to: A, bandwidth: 1MB/s}]}\n", "network.links[0]", "always free", ErrInvalid},
		{"link dup", base + "network: {links: [{from: A, to: B, bandwidth: 1MB/s}, {from: A, to: B, bandwidth: 2MB/s}]}\n", "network.links[1]", "already given", ErrInvalid},
		{"link no bandwidth", base + "network: {links: [{from: A, to: B}]}\n", "network.links[0].bandwidth", "missing", ErrInvalid},
		{"p", base + "network: {multi_site_factor: 0.9}\n", "network.multi_site_factor", "from 1 to 10", ErrInvalid},
		{"interval", base + "broker: {interval: 0s}\n", "broker.interval", "> 0", ErrInvalid},
		{"policy", base + "broker: {policy: ''}\n", "broker.policy", "must name a planner", ErrInvalid},
		{"state dir", base + "broker: {state_dir: rel}\n", "broker.state_dir", "absolute", ErrInvalid},
		{"cron", base + "broker: {cron: {sweep: 'every day'}}\n", "broker.cron.sweep", "not a cron spec", ErrInvalid},
		{"qos lambda", base + "broker: {qos: {lambda: -1}}\n", "broker.qos.lambda", "from 0", ErrInvalid},
		{"qos down_after", base + "broker: {qos: {down_after: -5s}}\n", "broker.qos.down_after", "from 0", ErrInvalid},
		{"time scale", base + "sim: {time_scale: 0}\n", "sim.time_scale", "> 0", ErrInvalid},
		{"seed", base + "sim: {seed: -1}\n", "sim.seed", "whole number", ErrInvalid},
		{"bad ref", base + "broker: {policy: '${1X}'}\n", "broker.policy", "not a variable reference", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("v.yaml", []byte(tc.src), env(map[string]string{"HOME": "/h"}))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.src)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("err %q is not %v", err, tc.sentinel)
			}
			want := "v.yaml: " + tc.key + ": "
			if tc.key == "" {
				want = "v.yaml: "
			}
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err %q\nwant it to contain %q and %q", err, want, tc.text)
			}
		})
	}
}

func TestParseBandwidth(t *testing.T) {
	for in, want := range map[string]float64{
		"1MB/s": 1e6, "100KB/s": 1e5, "50KB/s": 5e4, "64KiB/s": 65536, "10Mbps": 1.25e6, "1Gbps": 1.25e8,
		"10Kbps": 1250, "1000 bps": 125, "2.5 MB/s": 2.5e6,
	} {
		b, err := ParseBandwidth(in)
		if err != nil || math.Abs(float64(b)-want) > 1e-9 {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v", in, float64(b), err, want)
		}
	}
	for _, in := range []string{"", "fast", "10", "10 MB", "-1MB/s", "0bps", "10Xbps", "1e30Gbps"} {
		if b, err := ParseBandwidth(in); err == nil {
			t.Errorf("ParseBandwidth(%q) = %v, want an error", in, b)
		}
	}
	if Bandwidth(1e6).SecPerByte() != 1e-6 || Bandwidth(0).SecPerByte() != 0 || Bandwidth(1.25e5).String() != "125KB/s" {
		t.Error("Bandwidth helpers")
	}
}

func TestEmbeddedNames(t *testing.T) {
	names := configs.Names()
	for _, want := range []string{"testbed.yaml", "testbed-large-h.yaml", "local-slurm.yaml", "sim-pair.yaml"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("%s not embedded (have %v)", want, names)
		}
	}
	// Every embedded file loads (local-slurm with the testbed's environment).
	for _, n := range names {
		parseBuiltin(t, n, testbedEnv)
	}
	// The embedded copy is the file in configs/.
	disk, err := os.ReadFile("../../configs/testbed.yaml")
	emb, _ := configs.Read("testbed")
	if err != nil || string(disk) != string(emb) {
		t.Error("embedded testbed.yaml differs from configs/testbed.yaml")
	}
}

// TestLocalSlurmWithTestbedEnv loads local-slurm.yaml with the environment
// of a running local testbed, when there is one.
func TestLocalSlurmWithTestbedEnv(t *testing.T) {
	dir := os.Getenv("GRIDSUB_TESTBED_DIR")
	if dir == "" {
		dir = TestbedDir
	}
	data, err := os.ReadFile(dir + "/testbed.env")
	if err != nil {
		t.Skipf("no local testbed: %v", err)
	}
	e := map[string]string{"HOME": "/h"}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		e[k] = strings.Trim(v, `"'`)
	}
	c := parseBuiltin(t, "local-slurm.yaml", e)
	for i, s := range c.Sites {
		if s.SSH.Port < 1 || s.SSH.KeyFile == "" || !strings.HasPrefix(s.RemoteDir, "/") || s.Nodes < 1 {
			t.Errorf("site %d = %+v %+v", i, s, s.SSH)
		}
	}
	if c.Sites[0].SSH.Port == c.Sites[1].SSH.Port {
		t.Error("both sites on one port")
	}
}

// FuzzParse: no input makes Parse panic, and an accepted configuration is
// valid enough to build a snapshot from.
func FuzzParse(f *testing.F) {
	for _, n := range configs.Names() {
		data, _ := configs.Read(n)
		f.Add(data)
	}
	f.Add([]byte("sites: [{name: A, kind: sim, nodes: 1, h: ${X:-2}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data, env(testbedEnv))
		if err != nil {
			return
		}
		if len(c.Sites) == 0 || c.Network.MultiSiteFactor < 1 {
			t.Fatalf("accepted an invalid configuration: %+v", c)
		}
		for _, s := range c.Sites {
			if !(s.H > 0) || s.CoresPerNode < 1 {
				t.Fatalf("accepted site %+v", s)
			}
		}
		_ = c.Snapshot(time.Unix(0, 0))
	})
}

// TestStagingDefaults: the staging limits default to 10GiB per file, 50GiB
// per job, 1MiB/s over 1m, 4 fetch workers and 6h per fetch; a file's
// values and GRIDSUB_STAGING_* overrides replace them.
func TestStagingDefaults(t *testing.T) {
	const base = "sites:\n  - {name: A, kind: sim, nodes: 4}\n"
	cfg, err := Parse("d.yaml", []byte(base), func(k string) (string, bool) { return "/home/u", k == "HOME" })
	if err != nil {
		t.Fatal(err)
	}
	want := Staging{MaxFileSize: 10 << 30, MaxJobBytes: 50 << 30, MinRate: 1 << 20, MinTime: time.Minute, FetchWorkers: 4, FetchTimeout: 6 * time.Hour}
	if cfg.Staging != want {
		t.Fatalf("defaults %+v, want %+v", cfg.Staging, want)
	}
	env := map[string]string{"GRIDSUB_STAGING_MAX_JOB_BYTES": "3GB", "HOME": "/home/u"}
	cfg, err = Parse("d.yaml", []byte(base+"staging: {max_file_size: 512MiB, fetch_workers: 2}\n"), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Staging.MaxFileSize != 512<<20 || cfg.Staging.MaxJobBytes != 3e9 || cfg.Staging.FetchWorkers != 2 {
		t.Fatalf("overrides: %+v", cfg.Staging)
	}
}

// TestLocalPBS: the OpenPBS testbed's configuration loads as a pbs site
// with its bin directory; bin_dir is refused where it means nothing.
func TestLocalPBS(t *testing.T) {
	c := parseBuiltin(t, "local-pbs.yaml", testbedEnv)
	s := c.Sites[0]
	if s.Kind != KindPBS || s.BinDir != "/opt/pbs/bin" || s.RemoteDir != "/home/pbsuser/gridsub-runs" || s.Partition != "workq" || s.SSH.Port != 2330 {
		t.Fatalf("local-pbs site: %+v", s)
	}
	for _, bad := range []string{"sites[0].bin_dir = \"relative/bin\"", "sites[0].kind = \"slurm\""} {
		c2 := *c
		c2.Sites = append([]Site(nil), c.Sites...)
		if strings.HasPrefix(bad, "sites[0].bin_dir") {
			c2.Sites[0].BinDir = "relative/bin"
		} else {
			c2.Sites[0].Kind = KindSlurm
		}
		if err := c2.validate(); err == nil || !strings.Contains(err.Error(), "bin_dir") {
			t.Errorf("%s: %v, want an error naming bin_dir", bad, err)
		}
	}
}
