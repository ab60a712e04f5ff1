package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gridsub/gridsub/bridge/assemble"
	"github.com/gridsub/gridsub/bridge/plugins"
)

// route says where one field of a site's configuration (Site, its SSH
// and Plugin sections, and the Staging limits every site keeps) arrives.
type route struct {
	// wire is the field in the BackendConfig the backend receives, in
	// every mode ("" for a field that is no backend's).
	wire string
	// native is, for each built-in kind, the field of its own resolved
	// configuration (plugins.Resolved: Slurm, PBS, SSH, Sim) that takes
	// the value; "" when that kind has no place for it. Several fields may
	// take it, separated by commas. Every built-in kind is listed.
	native map[string]string
	// other is where a field that is no backend's goes: the assembled
	// site (site.), the broker's spec (spec.), or the catalog's
	// description of the backend (backend.).
	other string
	// only names the mode the field belongs to (plugin.* only exists for
	// an external plugin); "" = every mode.
	only string
}

func kinds(slurm, pbs, sim string) map[string]string {
	return map[string]string{KindSlurm: slurm, KindPBS: pbs, KindSim: sim}
}

// routes lists every leaf field by its configuration key. A field added
// to Site, SSH, Plugin or Staging without a row here fails
// TestEverySiteFieldReachesTheBackend until it is wired through the
// catalog and listed.
var routes = map[string]route{
	"name":           {wire: "Name", native: kinds("Slurm.Name", "PBS.Name", "Sim.Name")},
	"kind":           {wire: "Kind", native: kinds("", "", "")},                         // picks the built-in: checked apart
	"nodes":          {wire: "Nodes", native: kinds("", "", "Sim.Nodes")},               // a batch system reports its own
	"cores_per_node": {wire: "CoresPerNode", native: kinds("", "", "Sim.CoresPerNode")}, // likewise
	"h":              {wire: "H", native: kinds("", "", "Sim.H")},                       // the broker's h is site.H
	"mem_per_node":   {wire: "MemPerNode", native: kinds("", "", "Sim.MemPerNode")},
	"gpus_per_node":  {wire: "GPUsPerNode", native: kinds("", "", "Sim.GPUsPerNode")},
	"area":           {other: "site.Area"}, // the trust-min-min planner's, not the backend's

	"ssh.host":                     {wire: "SSH.Host", native: kinds("SSH.Host", "SSH.Host", "")},
	"ssh.port":                     {wire: "SSH.Port", native: kinds("SSH.Port", "SSH.Port", "")},
	"ssh.user":                     {wire: "SSH.User", native: kinds("SSH.User,Slurm.User", "SSH.User,PBS.User", "")},
	"ssh.key_file":                 {wire: "SSH.KeyFiles", native: kinds("SSH.KeyFiles", "SSH.KeyFiles", "")},
	"ssh.known_hosts":              {wire: "SSH.KnownHosts", native: kinds("SSH.KnownHosts", "SSH.KnownHosts", "")},
	"ssh.agent":                    {wire: "SSH.Agent", native: kinds("SSH.UseAgent", "SSH.UseAgent", "")},
	"ssh.insecure_ignore_host_key": {wire: "SSH.InsecureIgnoreHostKey", native: kinds("SSH.InsecureIgnoreHostKey", "SSH.InsecureIgnoreHostKey", "")},
	"ssh.max_sessions":             {wire: "SSH.MaxSessions", native: kinds("SSH.MaxSessions", "SSH.MaxSessions", "")},
	"ssh.ssh_config":               {wire: "SSH.SSHConfig", native: kinds("SSH.SSHConfig", "SSH.SSHConfig", "")},
	"ssh.cert_file":                {wire: "SSH.CertFiles", native: kinds("SSH.CertFiles", "SSH.CertFiles", "")},
	"ssh.proxy_jump":               {wire: "SSH.ProxyJump", native: kinds("SSH.ProxyJump", "SSH.ProxyJump", "")},

	"partition":     {wire: "Partition", native: kinds("Slurm.Partition", "PBS.Queue", "")},
	"account":       {wire: "Account", native: kinds("Slurm.Account", "PBS.Account", "")},
	"remote_dir":    {wire: "RemoteDir", native: kinds("Slurm.RemoteDir", "PBS.RemoteDir", "")},
	"bin_dir":       {wire: "BinDir", native: kinds("", "PBS.BinDir", "")},
	"native_arrays": {wire: "NativeArrays", native: kinds("Slurm.NativeArrays", "PBS.NativeArrays", "")},
	"isolate":       {}, // picks the mode: checked apart

	"plugin.path":          {other: "backend.Path", only: plugins.ModeExternal},
	"plugin.sha256":        {other: "backend.SHA256", only: plugins.ModeExternal},
	"plugin.args":          {other: "backend.Args", only: plugins.ModeExternal},
	"plugin.options":       {wire: "Options", only: plugins.ModeExternal},
	"plugin.start_timeout": {other: "backend.StartTimeout", only: plugins.ModeExternal},

	"staging.max_file_size":  {wire: "Staging.MaxFileSize", native: kinds("SSH.MaxFileSize,Slurm.MaxFileSize", "SSH.MaxFileSize", "")},
	"staging.max_job_bytes":  {wire: "Staging.MaxJobBytes", native: kinds("Slurm.MaxJobBytes", "PBS.MaxJobBytes", "")},
	"staging.min_rate":       {wire: "Staging.MinRate", native: kinds("SSH.MinTransferRate", "SSH.MinTransferRate", "")},
	"staging.min_time":       {wire: "Staging.MinTime", native: kinds("SSH.MinTransferTime", "SSH.MinTransferTime", "")},
	"budget.per_minute":      {wire: "Budget.PerMinute", native: kinds("Slurm.Budget.PerMinute", "PBS.Budget.PerMinute", "")},
	"budget.burst":           {wire: "Budget.Burst", native: kinds("Slurm.Budget.Burst", "PBS.Budget.Burst", "")},
	"budget.poll_fast":       {wire: "Budget.PollFast", native: kinds("Slurm.Budget.PollFast", "PBS.Budget.PollFast", "")},
	"budget.poll_slow":       {wire: "Budget.PollSlow", native: kinds("Slurm.Budget.PollSlow", "PBS.Budget.PollSlow", "")},
	"budget.settle":          {wire: "Budget.Settle", native: kinds("Slurm.Budget.Settle", "PBS.Budget.Settle", "")},
	"budget.capacity_every":  {wire: "Budget.CapacityEvery", native: kinds("Slurm.Budget.CapacityEvery", "PBS.Budget.CapacityEvery", "")},
	"budget.backoff_max":     {wire: "Budget.BackoffMax", native: kinds("Slurm.Budget.BackoffMax", "PBS.Budget.BackoffMax", "")},
	"budget.command_timeout": {wire: "Budget.CommandTimeout", native: kinds("Slurm.CommandTimeout", "PBS.CommandTimeout", "")},

	"staging.fetch_workers": {other: "spec.FetchWorkers"}, // the broker's output fetching
	"staging.fetch_timeout": {other: "spec.FetchTimeout"},
}

// leaf is one field of the configuration with the distinct value the test
// gives it.
type leaf struct {
	key string
	val reflect.Value
}

// fillLeaves gives every leaf field of v (a struct, reached through pointers,
// which it allocates) a value no other leaf has, and returns the leaves.
func fillLeaves(t *testing.T, v reflect.Value, prefix string, leaves *[]leaf) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		tag := strings.Split(f.Tag.Get("mapstructure"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		key := prefix + tag
		fv := v.Field(i)
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			fv.Set(reflect.New(f.Type.Elem()))
			fillLeaves(t, fv.Elem(), key+".", leaves)
			continue
		}
		n := len(*leaves) + 1
		switch {
		case f.Type == reflect.TypeOf(time.Duration(0)):
			fv.SetInt(int64(time.Duration(n)*time.Second + 7*time.Millisecond))
		case f.Type.Kind() == reflect.String:
			fv.SetString("v-" + key)
		case f.Type.Kind() == reflect.Bool:
			fv.SetBool(true)
		case f.Type == reflect.TypeOf((*bool)(nil)):
			yes := true
			fv.Set(reflect.ValueOf(&yes))
		case f.Type.Kind() == reflect.Int || f.Type.Kind() == reflect.Int64:
			fv.SetInt(int64(1000*n + 7))
		case f.Type.Kind() == reflect.Float64:
			fv.SetFloat(float64(1000*n) + 0.25)
		case f.Type == reflect.TypeOf([]string(nil)):
			fv.Set(reflect.ValueOf([]string{"v-" + key, "w-" + key}))
		case f.Type == reflect.TypeOf(map[string]any(nil)):
			fv.Set(reflect.ValueOf(map[string]any{"v-" + key: float64(n)}))
		default:
			t.Fatalf("%s: the test cannot give a %s a value yet; teach fillLeaves", key, f.Type)
		}
		*leaves = append(*leaves, leaf{key, fv})
	}
}

// at is the field at dotted path below v, through pointers; ok is false
// when a pointer on the way is nil.
func at(v reflect.Value, path string) (reflect.Value, bool) {
	for _, name := range strings.Split(path, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return v, false
			}
			v = v.Elem()
		}
		v = v.FieldByName(name)
		if !v.IsValid() {
			panic("no field " + name + " in " + path)
		}
	}
	return v, true
}

// same reports whether got carries the value want: equal, equal as
// numbers, a one-element list of it (key_file -> KeyFiles), or the same
// JSON (plugin.options -> Options).
func same(want, got reflect.Value) bool {
	if want.Kind() == reflect.Pointer && !want.IsNil() && want.Elem().Kind() == reflect.Bool {
		want = want.Elem() // an optional flag (native_arrays)
	}
	if got.Type() == reflect.TypeOf(json.RawMessage(nil)) {
		var a, b any
		wj, _ := json.Marshal(want.Interface())
		return json.Unmarshal(wj, &a) == nil && json.Unmarshal(got.Bytes(), &b) == nil && reflect.DeepEqual(a, b)
	}
	if got.Kind() == reflect.Slice && want.Kind() != reflect.Slice {
		return got.Len() == 1 && same(want, got.Index(0))
	}
	switch want.Kind() {
	case reflect.Int, reflect.Int64:
		switch got.Kind() {
		case reflect.Int, reflect.Int64:
			return got.Int() == want.Int()
		case reflect.Float64:
			return got.Float() == float64(want.Int())
		}
	case reflect.Float64:
		return got.CanFloat() && got.Float() == want.Float()
	}
	return want.Type().ConvertibleTo(got.Type()) && reflect.DeepEqual(want.Convert(got.Type()).Interface(), got.Interface())
}

// TestEverySiteFieldReachesTheBackend gives every field of a site's
// configuration a value of its own and follows it through
// Config.Spec and the plugin catalog, for each built-in in process and
// isolated and for an external plugin: each value must arrive where its
// route says, in the BackendConfig the backend receives and in the
// built-in's own configuration (plugins.Resolve: what the backend is built
// with, on the plugin's side of the wire when out of process). A field
// with no route fails the test.
func TestEverySiteFieldReachesTheBackend(t *testing.T) {
	type mode struct{ name, kind string }
	var modes []mode
	for _, k := range []string{KindSlurm, KindPBS, KindSim} {
		modes = append(modes, mode{plugins.ModeInProcess, k}, mode{plugins.ModeIsolated, k})
	}
	modes = append(modes, mode{plugins.ModeExternal, "local"})
	for _, m := range modes {
		t.Run(m.name+"/"+m.kind, func(t *testing.T) {
			cfg := &Config{Sites: make([]Site, 1)}
			var leaves []leaf
			fillLeaves(t, reflect.ValueOf(&cfg.Sites[0]).Elem(), "", &leaves)
			fillLeaves(t, reflect.ValueOf(&cfg.Staging).Elem(), "staging.", &leaves)
			s := &cfg.Sites[0]
			s.Kind, s.Isolate = m.kind, m.name == plugins.ModeIsolated
			if m.name != plugins.ModeExternal {
				s.Plugin = nil
			}
			spec, err := cfg.Spec(nil)
			if err != nil {
				t.Fatal(err)
			}
			site := spec.Sites[0]
			r, err := plugins.Resolve(*site.Backend)
			if err != nil {
				t.Fatal(err)
			}
			if r.Mode != m.name {
				t.Fatalf("isolate %v, plugin %v: mode %s, want %s", s.Isolate, s.Plugin != nil, r.Mode, m.name)
			}
			if r.Config.Kind != m.kind || (m.name != plugins.ModeExternal && r.Builtin != m.kind) {
				t.Errorf("kind %s: the backend was told kind %q, built-in %q", m.kind, r.Config.Kind, r.Builtin)
			}
			others := reflect.ValueOf(struct {
				Site    assemble.SiteSpec
				Spec    assemble.Spec
				Backend plugins.BackendSpec
			}{site, spec, *site.Backend})
			seen := map[string]bool{}
			for _, l := range leaves {
				seen[l.key] = true
				rt, ok := routes[l.key]
				if !ok {
					t.Errorf("%s: no route; wire it through Config.BackendSpec and the catalog (bridge/plugins), then list it in routes", l.key)
					continue
				}
				if l.key == "kind" || l.key == "isolate" || (rt.only != "" && rt.only != m.name) {
					continue
				}
				check := func(where string, root reflect.Value, path string) {
					got, ok := at(root, path)
					if !ok || !same(l.val, got) {
						val := "nil"
						if ok {
							val = fmt.Sprint(got.Interface())
						}
						t.Errorf("%s = %v: %s %s is %s", l.key, l.val.Interface(), where, path, val)
					}
				}
				if rt.wire != "" {
					check("the backend's configuration", reflect.ValueOf(r.Config), rt.wire)
				}
				if rt.other != "" {
					root, path, _ := strings.Cut(rt.other, ".")
					check("the assembled "+root, others.FieldByName(strings.ToUpper(root[:1])+root[1:]), path)
				}
				if rt.wire == "" && rt.other == "" {
					t.Errorf("%s: its route names no destination", l.key)
				}
				if rt.wire != "" && rt.only == "" && m.name != plugins.ModeExternal {
					native, listed := rt.native[m.kind]
					if !listed {
						t.Errorf("%s: its route does not say where kind %s takes it", l.key, m.kind)
					}
					for _, p := range strings.Split(native, ",") {
						if p != "" {
							check(m.kind+"'s own configuration", reflect.ValueOf(r), p)
						}
					}
				}
			}
			for k := range routes {
				if !seen[k] {
					t.Errorf("route %s names no field of the configuration", k)
				}
			}
		})
	}
}

// TestIsolatedSiteKeepsItsAccount: a site with account: and isolate:
// true charges its jobs to that account, as in process.
func TestIsolatedSiteKeepsItsAccount(t *testing.T) {
	for _, kind := range []string{KindSlurm, KindPBS} {
		for _, isolate := range []bool{false, true} {
			cfg := &Config{Sites: []Site{{Name: "a", Kind: kind, Account: "proj42", Isolate: isolate,
				SSH: &SSH{Host: "login", Port: 22, User: "u"}}}}
			spec, err := cfg.Spec(nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := plugins.Resolve(*spec.Sites[0].Backend)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			switch {
			case r.Slurm != nil:
				got = r.Slurm.Account
			case r.PBS != nil:
				got = r.PBS.Account
			}
			if got != "proj42" {
				t.Errorf("%s isolate %v: account %q, want proj42", kind, isolate, got)
			}
		}
	}
}
