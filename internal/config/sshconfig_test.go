package config

import (
	"strings"
	"testing"
)

// With ssh_config the login node's port, user, key and known_hosts may
// come from the OpenSSH configuration (they are not required, and the port
// is not defaulted, so that the file's wins); the fields given still win
// and are still checked; a relative ssh_config or a proxy_jump that is not
// "[user@]host[:port],..." is refused.
func TestSSHConfigFields(t *testing.T) {
	src := "sites:\n  - {name: R, kind: slurm, remote_dir: /scratch, ssh: {host: mycluster, ssh_config: default%s}}\n"
	c, err := Parse("v.yaml", []byte(strings.Replace(src, "%s", "", 1)), env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	x := c.Sites[0].SSH
	if x.Port != 0 || x.SSHConfig != "default" || x.MaxSessions != 8 {
		t.Errorf("loaded %+v: want port 0 (from the ssh configuration), max_sessions 8", *x)
	}
	c, err = Parse("v.yaml", []byte(strings.Replace(src, "%s", ", port: 2222, cert_file: /c-cert.pub, proxy_jump: 'a@b:23,c'", 1)), env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if x := c.Sites[0].SSH; x.Port != 2222 || x.CertFile != "/c-cert.pub" || x.ProxyJump != "a@b:23,c" {
		t.Errorf("loaded %+v", *x)
	}
	for _, tc := range []struct{ extra, key string }{
		{", ssh_config: rel/config", "ssh_config"},
		{", proxy_jump: 'a,,b'", "proxy_jump"},
		{", proxy_jump: 'a;rm -rf ~'", "proxy_jump"},
		{", port: 70000", "port"},
	} {
		s := strings.Replace(src, "%s", tc.extra, 1)
		if tc.key == "ssh_config" {
			s = strings.Replace(s, "ssh_config: default, ", "", 1)
		}
		_, err := Parse("v.yaml", []byte(s), env(map[string]string{"HOME": "/h"}))
		if err == nil || !strings.Contains(err.Error(), "sites[0].ssh."+tc.key) {
			t.Errorf("%s: got %v, want an error at sites[0].ssh.%s", tc.extra, err, tc.key)
		}
	}
	// Without ssh_config every field is required, as before.
	_, err = Parse("v.yaml", []byte("sites:\n  - {name: R, kind: slurm, remote_dir: /scratch, ssh: {host: h}}\n"), env(map[string]string{"HOME": "/h"}))
	if err == nil || !strings.Contains(err.Error(), "sites[0].ssh.user") {
		t.Errorf("no ssh_config and no user: %v", err)
	}
}
