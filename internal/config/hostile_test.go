package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostileFiles: Load refuses what is not a regular file, without
// blocking on a FIFO or reading /dev/zero without end, and a file over
// MaxFileSize, each with an error naming the file and the problem.
func TestHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, says string }{
		{fifo, "is a named pipe (FIFO), not a regular file"},
		{"/dev/zero", "is a character device, not a regular file"},
		{dir, "is a directory, not a regular file"},
		{big, "a configuration file may be at most 1048576 bytes"},
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(tc.path); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrRead) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Load(%s) = %v; want ErrRead saying %q", tc.path, err, tc.says)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) still reading after 5s", tc.path)
		}
	}
	if _, err := Parse("mem.yaml", make([]byte, MaxFileSize+1), env(nil)); !errors.Is(err, ErrRead) || !strings.Contains(err.Error(), "at most") {
		t.Errorf("Parse of %d bytes: %v", MaxFileSize+1, err)
	}
}

// TestHostileValues: every numeric field out of its range, or at a value
// that would overflow the arithmetic built on it or stall the daemon's
// clock, is refused naming the key.
func TestHostileValues(t *testing.T) {
	const base = "sites:\n  - {name: A, kind: sim, nodes: 4}\n  - {name: B, kind: sim, nodes: 2}\n"
	site := func(kv string) string { return "sites:\n  - {name: A, kind: sim, " + kv + "}\n" }
	remote := func(kv string) string {
		return "sites:\n  - {name: R, kind: slurm, remote_dir: /scratch, ssh: {host: h, user: u, key_file: /k, known_hosts: /kh" + kv + "}}\n"
	}
	for _, tc := range []struct{ name, src, key, says string }{
		{"nodes 2^40", site("nodes: 1099511627776"), "sites[0].nodes", "from 1 to 1048576"},
		{"nodes 2^63", site("nodes: 9223372036854775808"), "sites[0].nodes", "must be a whole number"},
		{"nodes 1e30", site("nodes: 1e30"), "sites[0].nodes", "must be a whole number"},
		{"nodes negative", site("nodes: -5"), "sites[0].nodes", "from 1 to"},
		{"remote nodes huge", "sites:\n  - {name: R, kind: slurm, nodes: 99999999, remote_dir: /s, ssh: {host: h, user: u, key_file: /k, known_hosts: /kh}}\n", "sites[0].nodes", "from 0 (= ask the site) to 1048576"},
		{"cores 1e9", site("nodes: 1, cores_per_node: 1000000000"), "sites[0].cores_per_node", "from 1 to 65536"},
		{"h tiny", site("nodes: 1, h: 1e-300"), "sites[0].h", "from 0.01 to 100"},
		{"h huge", site("nodes: 1, h: 1e300"), "sites[0].h", "from 0.01 to 100"},
		{"h NaN", site("nodes: 1, h: .nan"), "sites[0].h", "from 0.01 to 100"},
		{"h Inf", site("nodes: 1, h: .inf"), "sites[0].h", "from 0.01 to 100"},
		{"h negative", site("nodes: 1, h: -1"), "sites[0].h", "from 0.01 to 100"},
		{"port 2^40", remote(", port: 1099511627776"), "sites[0].ssh.port", "1..65535"},
		{"sessions 2^40", remote(", max_sessions: 1099511627776"), "sites[0].ssh.max_sessions", "1..1024"},
		{"bandwidth a trickle", base + "network: {default: {bandwidth: 0.001bps}}\n", "network.default.bandwidth", "below the minimum of 1KB/s"},
		{"bandwidth 1 B/s", base + "network: {default: {bandwidth: 1B/s}}\n", "network.default.bandwidth", "below the minimum"},
		{"bandwidth huge", base + "network: {default: {bandwidth: 99999999999Gbps}}\n", "network.default.bandwidth", "finite"},
		{"link bandwidth a trickle", base + "network: {links: [{from: A, to: B, bandwidth: 10bps}]}\n", "network.links[0].bandwidth", "below the minimum"},
		{"latency 1000h", base + "network: {default: {latency: 1000h}}\n", "network.default.latency", "from 0 to 1h0m0s"},
		{"latency overflow", base + "network: {default: {latency: 99999999999h}}\n", "network.default.latency", ""},
		{"latency negative", base + "network: {default: {latency: -1s}}\n", "network.default.latency", ""},
		{"link latency 1000h", base + "network: {links: [{from: A, to: B, bandwidth: 1MB/s, latency: 1000h}]}\n", "network.links[0].latency", "from 0 to 1h"},
		{"p huge", base + "network: {multi_site_factor: 1e308}\n", "network.multi_site_factor", "from 1 to 10"},
		{"p NaN", base + "network: {multi_site_factor: .nan}\n", "network.multi_site_factor", "from 1 to 10"},
		{"interval 1ns", base + "broker: {interval: 1ns}\n", "broker.interval", "from 10ms to 8784h0m0s"},
		{"interval 100 years", base + "broker: {interval: 876000h}\n", "broker.interval", "from 10ms"},
		{"poll interval 1ns", base + "broker: {poll_interval: 1ns}\n", "broker.poll_interval", "from 10ms"},
		{"cron every 1ns", base + "broker: {cron: {cycle: '@every 1ns'}}\n", "broker.cron.cycle", "from 10ms to 8784h0m0s"},
		{"cron every 100 years", base + "broker: {cron: {health: '@every 876000h'}}\n", "broker.cron.health", "@every D"},
		{"cron every garbage", base + "broker: {cron: {health: '@every soon'}}\n", "broker.cron.health", "@every D"},
		{"cron never", base + "broker: {cron: {trust: '0 0 30 2 *'}}\n", "broker.cron.trust", "never fires"},
		{"time scale tiny", base + "sim: {time_scale: 1e-300}\n", "sim.time_scale", "from 0.01 to 10000"},
		{"time scale huge", base + "sim: {time_scale: 1e300}\n", "sim.time_scale", "from 0.01 to 10000"},
		{"time scale NaN", base + "sim: {time_scale: .nan}\n", "sim.time_scale", "> 0"},
		{"time scale Inf", base + "sim: {time_scale: .inf}\n", "sim.time_scale", "> 0"},
		{"tls cert without key", base + "broker: {tls_cert: /c.pem}\n", "broker.tls_cert", "both broker.tls_cert and broker.tls_key"},
		{"tls key without cert", base + "broker: {tls_key: /k.pem}\n", "broker.tls_cert", "or neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("h.yaml", []byte(tc.src), env(map[string]string{"HOME": "/h"}))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.src)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "h.yaml: "+tc.key+": ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err %q\nwant ErrInvalid naming %s and saying %q", err, tc.key, tc.says)
			}
		})
	}
	// The bounds themselves are accepted.
	ok := "sites:\n  - {name: A, kind: sim, nodes: 1048576, cores_per_node: 65536, h: 0.01}\n  - {name: B, kind: sim, nodes: 1, h: 100}\n" +
		"network: {default: {bandwidth: 1KB/s, latency: 1h}, multi_site_factor: 10}\n" +
		"broker: {interval: 10ms, poll_interval: 8784h, cron: {cycle: '@every 10ms', trust: '0 0 29 2 *'}, tls_cert: /c, tls_key: /k, insecure_plaintext: true}\n" +
		"sim: {time_scale: 10000}\n"
	if _, err := Parse("ok.yaml", []byte(ok), env(map[string]string{"HOME": "/h"})); err != nil {
		t.Fatalf("values at the bounds refused: %v", err)
	}
}
